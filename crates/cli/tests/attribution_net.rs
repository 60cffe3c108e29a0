//! NET RX attribution against an exact ground truth (root and BPF needed: run with
//! `cargo test -p pkprof --test attribution_net -- --include-ignored --nocapture --test-threads=1`).
//!
//! Each test builds its own pair of network namespaces joined by a veth (sender side `tx`, receiver
//! side `rx`, addresses 10.200.0.1/2 or fd00::1/2, never visible outside them). RPS steers the
//! receive work of the rx end to CPU 1 and that of the tx end (TCP ACKs) to CPU 0; the sender and
//! the receivers are pinned to CPU 0, an unrelated CPU hog to CPU 1.
//!
//! Ground truth: the NET_RX softirq time of each CPU over the traffic window, from pkprof's per-CPU
//! exact interrupt time (`cpus[].total.softirq_ns[3]`, softirq entry/exit timestamps: a mechanism
//! apart from the attribution chain), less the CPU's NET_RX rate measured just before the traffic.
//! Attributed: the `served_ns[0]` growth of our processes up to their final (exited) rows.
//!
//! Other tests may run at the same time. Their network traffic would inflate the ground truth, so a
//! run that sees foreign NET work (a baseline NET_RX rate, or NET work attributed to processes
//! that are not ours) is repeated, up to three times; the bars never change.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use common::netns::Link;
use common::*;
use serde_json::Value;

const NET: usize = 0; // served_ns index of the NET chain
const NET_RX: usize = 3; // softirq vector

/// Every process's latest cumulative row totals and the CPUs' counters, as of a frame.
#[derive(Clone, Default)]
struct Tally {
    totals: HashMap<u32, Value>,
    exited: HashSet<u32>,
    cpus: Vec<Value>,
    unix_s: f64,
}

impl Tally {
    fn observe(&mut self, f: &Value) {
        for r in rows(f) {
            let pid = u64_of(r, "pid") as u32;
            self.totals.insert(pid, r["total"].clone());
            if r["exited"].as_bool() == Some(true) {
                self.exited.insert(pid);
            }
        }
        self.cpus = f["cpus"].as_array().expect("cpus").clone();
        self.unix_s = f["unix_s"].as_f64().unwrap();
    }

    /// Cumulative counter of a process: element `i` of an array field (0 when never seen).
    fn get(&self, pid: u32, field: &str, i: usize) -> u64 {
        self.totals
            .get(&pid)
            .map_or(0, |t| t[field][i].as_u64().unwrap())
    }

    /// Per CPU, `get(total)` now less at `earlier`.
    fn cpu_delta(&self, earlier: &Tally, get: impl Fn(&Value) -> u64) -> Vec<u64> {
        let (now, then) = (self.cpus.iter(), earlier.cpus.iter());
        now.zip(then)
            .map(|(c, e)| get(&c["total"]) - get(&e["total"]))
            .collect()
    }
}

fn net_rx(t: &Value) -> u64 {
    t["softirq_ns"][NET_RX].as_u64().unwrap()
}

/// One scenario: a sender, one or more receivers on their own sockets, maybe a hog on CPU 1.
struct Scenario {
    tag: &'static str,
    v6: bool,
    proto: &'static str,
    /// (port, weight): the sender sends `weight` datagrams in a row to each port in turn.
    ports: &'static [(u16, u32)],
    size: u32,
    seconds: f64,
    hog: bool,
    /// Receivers poll without sleeping (no wake-ups: the same kernel work for every packet).
    spin: bool,
}

/// What one run measured (all ns over the window).
#[derive(Debug)]
struct Outcome {
    /// Per CPU: NET_RX time in the window less the baseline. The ground truth.
    truth_ns: Vec<u64>,
    window_ns: u64,
    baseline_ns: u64,
    /// Per receiver: served NET ns, served NET items, packets received, NET_RX Linux billed it.
    receivers: Vec<(u64, u64, u64, u64)>,
    sent_per_port: Vec<u64>,
    sender_served_ns: u64,
    sender_billed_ns: u64,
    hog_served_ns: u64,
    hog_billed_ns: u64,
    foreign_served_ns: u64,
    kernel_irq_ns: u64,
    expired_ns: u64,
}

impl Outcome {
    fn truth(&self) -> u64 {
        self.truth_ns.iter().sum()
    }

    fn share(&self, ns: u64) -> f64 {
        ns as f64 / self.truth().max(1) as f64
    }

    fn print(&self, what: &str) {
        let ms = |v: u64| v as f64 / 1e6;
        let pct = |v: u64| 100.0 * self.share(v);
        let cpus: Vec<String> = self
            .truth_ns
            .iter()
            .map(|&v| format!("{:.1}", ms(v)))
            .collect();
        eprintln!(
            "{what}: NET_RX truth {:.1} ms (cpus {} ms; window {:.1} ms - baseline {:.1} ms)",
            ms(self.truth()),
            cpus.join(" + "),
            ms(self.window_ns),
            ms(self.baseline_ns)
        );
        for (i, (ns, items, got, billed)) in self.receivers.iter().enumerate() {
            let sent = self.sent_per_port.get(i).map_or("-".into(), u64::to_string);
            eprintln!(
                "  receiver {i}: served {:.1} ms = {:.1}% of truth, {items} items, {got} received, \
                 {sent} sent; Linux billed it {:.1} ms of NET_RX",
                ms(*ns),
                pct(*ns),
                ms(*billed)
            );
        }
        for (who, served, billed) in [
            ("sender", self.sender_served_ns, self.sender_billed_ns),
            ("hog", self.hog_served_ns, self.hog_billed_ns),
        ] {
            eprintln!(
                "  {who}: served {:.1} ms ({:.2}%); Linux billed it {:.1} ms of NET_RX ({:.1}%)",
                ms(served),
                pct(served),
                ms(billed),
                pct(billed)
            );
        }
        eprintln!(
            "  foreign served {:.1} ms; all KERNEL interrupt time {:.1} ms (expired {:.1} ms)",
            ms(self.foreign_served_ns),
            ms(self.kernel_irq_ns),
            ms(self.expired_ns)
        );
    }

    /// Foreign network work in the window: the run says nothing about pkprof.
    fn disturbed(&self) -> bool {
        self.baseline_ns * 100 > self.window_ns * 3
            || self.foreign_served_ns * 100 > self.truth() * 2
    }
}

fn bins() -> (PathBuf, PathBuf, PathBuf) {
    let b = build_workload;
    (b("net_send"), b("net_recv"), b("net_hog"))
}

/// Reads frames into `tally` until `done` holds for it.
fn follow(top: &mut Top, tally: &mut Tally, secs: u64, mut done: impl FnMut(&Tally) -> bool) {
    top.wait_for(Duration::from_secs(secs), |f| {
        tally.observe(f);
        done(tally)
    });
}

/// Runs the scenario once.
fn measure(sc: &Scenario) -> Outcome {
    let (send_bin, recv_bin, hog_bin) = bins();
    let link = Link::new(sc.tag, sc.v6);
    let mut top = Top::start(&["-d", "0.5"]);
    let mut tally = Tally::default();
    let wait = Duration::from_secs_f64(sc.seconds + 10.0);

    let mut hog = sc.hog.then(|| {
        let mut h = Proc::spawn(cmd(&hog_bin, &["1"]));
        h.expect("hog", wait);
        h
    });
    let mut receivers: Vec<Proc> = (sc.ports.iter())
        .map(|(port, _)| {
            let port = port.to_string();
            let mut args = vec![&link.rx.0[..], sc.proto, link.rx_addr, &port, "0"];
            if sc.spin {
                args.push("spin");
            }
            let mut r = Proc::spawn(cmd(&recv_bin, &args));
            r.expect("ready", wait);
            r
        })
        .collect();

    // Baseline: NET_RX over two frames (~1 s) with everything in place but no traffic yet. While
    // someone else's traffic keeps it above 5 ms (0.25% of the machine), wait up to ~15 s.
    while let Some(f) = top.next_frame(Duration::ZERO) {
        tally.observe(&f); // frames queued while starting up
    }
    follow(&mut top, &mut tally, 5, |_| true);
    let (mut before, mut t0) = (tally.clone(), tally.clone());
    for _ in 0..15 {
        before = tally.clone();
        let mut frames = 0;
        follow(&mut top, &mut tally, 5, |_| {
            frames += 1;
            frames == 2
        });
        t0 = tally.clone();
        if t0.cpu_delta(&before, net_rx).iter().sum::<u64>() < 5_000_000 {
            break;
        }
    }
    let base_secs = t0.unix_s - before.unix_s;

    let ports: Vec<String> = sc.ports.iter().map(|(p, w)| format!("{p}:{w}")).collect();
    let (ports, secs, size) = (ports.join(","), sc.seconds.to_string(), sc.size.to_string());
    let args = [
        &link.tx.0[..],
        sc.proto,
        link.rx_addr,
        &ports,
        "0",
        &secs,
        &size,
        "0",
    ];
    let mut sender = Proc::spawn(cmd(&send_bin, &args));
    sender.expect("sent", wait);
    let sent_per_port: Vec<u64> = match sc.proto {
        "udp" => (sc.ports.iter())
            .map(|_| sender.expect("port", wait)[1].parse().unwrap())
            .collect(),
        _ => vec![],
    };
    sender.wait(wait);
    std::thread::sleep(Duration::from_millis(100));
    let mut got = Vec::new();
    for r in &mut receivers {
        r.close_stdin();
        got.push(r.expect("received", wait)[0].parse::<u64>().unwrap());
        r.wait(wait);
    }
    if let Some(h) = hog.as_mut() {
        h.close_stdin();
        h.expect("spun", wait);
        h.wait(wait);
    }

    // The window ends with the frame holding the final rows of all our processes.
    let mine: Vec<u32> = (receivers.iter().chain(&hog).chain([&sender]))
        .map(Proc::pid)
        .collect();
    follow(&mut top, &mut tally, 10, |t| {
        mine.iter().all(|p| t.exited.contains(p))
    });
    top.stop();

    let d = |pid: u32, field: &str, i: usize| tally.get(pid, field, i) - t0.get(pid, field, i);
    let scale = (tally.unix_s - t0.unix_s) / base_secs;
    let window = tally.cpu_delta(&t0, net_rx);
    let baseline: Vec<u64> = (t0.cpu_delta(&before, net_rx).iter())
        .map(|&b| (b as f64 * scale) as u64)
        .collect();
    let foreign_served_ns = (tally.totals.keys())
        .filter(|p| !mine.contains(p))
        .map(|&p| d(p, "served_ns", NET))
        .sum();
    let hog_pid = hog.as_ref().map(Proc::pid);
    let sum = |v: Vec<u64>| v.iter().sum::<u64>();
    Outcome {
        truth_ns: window
            .iter()
            .zip(&baseline)
            .map(|(w, b)| w.saturating_sub(*b))
            .collect(),
        window_ns: window.iter().sum(),
        baseline_ns: baseline.iter().sum(),
        receivers: (receivers.iter().zip(&got))
            .map(|(r, &n)| {
                let p = r.pid();
                let billed = d(p, "softirq_ns", NET_RX);
                (d(p, "served_ns", NET), d(p, "served_items", NET), n, billed)
            })
            .collect(),
        sent_per_port,
        sender_served_ns: d(sender.pid(), "served_ns", NET),
        sender_billed_ns: d(sender.pid(), "softirq_ns", NET_RX),
        hog_served_ns: hog_pid.map_or(0, |p| d(p, "served_ns", NET)),
        hog_billed_ns: hog_pid.map_or(0, |p| d(p, "softirq_ns", NET_RX)),
        foreign_served_ns,
        kernel_irq_ns: sum(tally.cpu_delta(&t0, |t| u64_of(t, "kernel_irq_ns"))),
        expired_ns: sum(tally.cpu_delta(&t0, |t| u64_of(t, "expired_ns"))),
    }
}

/// Runs the scenario until a run is free of foreign network work (at most three runs).
fn measure_quiet(sc: &Scenario) -> Outcome {
    for attempt in 1.. {
        let o = measure(sc);
        o.print(&format!("{} run {attempt}", sc.tag));
        if !o.disturbed() {
            return o;
        }
        if attempt == 3 {
            eprintln!("  other network traffic in all three runs: judging the last one anyway");
            return o;
        }
        eprintln!("  foreign network work in the window: measuring again");
        std::thread::sleep(Duration::from_secs(1));
    }
    unreachable!()
}

/// Enough traffic to judge, with part of it run on top of the hog (RPS works); the hog's cost
/// holds none of it.
fn assert_setup_and_hog(o: &Outcome) {
    assert!(
        o.truth() > 20_000_000,
        "too little NET_RX time to judge: {o:?}"
    );
    assert!(
        o.hog_billed_ns > 0,
        "RPS put no receive work on the hog's CPU: {o:?}"
    );
    let hog = o.share(o.hog_served_ns);
    assert!(
        hog <= 0.05,
        "the hog's cost has {:.1}% of the NET_RX time: {o:?}",
        100.0 * hog
    );
}

/// `ns` is 95% .. 105% of the ground truth.
fn assert_gets_all(o: &Outcome, who: &str, ns: u64) {
    let share = o.share(ns);
    assert!(
        (0.95..=1.05).contains(&share),
        "{who} attributed {:.1}% of the NET_RX time, want 95% .. 105%: {o:?}",
        100.0 * share
    );
}

fn udp_single(tag: &'static str, v6: bool) {
    let o = measure_quiet(&Scenario {
        tag,
        v6,
        proto: "udp",
        ports: &[(9000, 1)],
        size: 64,
        seconds: 3.0,
        hog: true,
        spin: false,
    });
    let (rx_ns, _, got, _) = o.receivers[0];
    assert!(got > 10_000, "receiver got only {got} datagrams: {o:?}");
    assert_setup_and_hog(&o);
    assert_gets_all(&o, "the receiver", rx_ns);
}

#[test]
#[ignore = "needs root and BPF"]
fn udp_receiver_in_netns_gets_its_softirq_time() {
    udp_single("udp4", false);
}

#[test]
#[ignore = "needs root and BPF"]
fn ipv6_udp() {
    udp_single("udp6", true);
}

/// TCP: the data path is the receiver's (including segments TCP parks on the socket backlog while
/// the reader holds the socket, and the RPS hand-over on CPU 0), the ACKs coming back are the
/// sender's (its socket's work). CPU 1 (RPS of the rx end) runs only data segments, so the
/// receiver must get at least its NET_RX time; the two together must get all of it.
#[test]
#[ignore = "needs root and BPF"]
fn tcp_receiver_in_netns_gets_its_softirq_time() {
    let o = measure_quiet(&Scenario {
        tag: "tcp4",
        v6: false,
        proto: "tcp",
        ports: &[(9000, 1)],
        size: 64 << 10,
        seconds: 3.0,
        hog: true,
        spin: false,
    });
    let (rx_ns, _, got, _) = o.receivers[0];
    assert!(got > 1000, "receiver did only {got} reads: {o:?}");
    assert_setup_and_hog(&o);
    let data = o.truth_ns[1];
    eprintln!(
        "  receiver got {:.1}% of CPU 1's NET_RX (data only), receiver + sender {:.1}% of all",
        100.0 * rx_ns as f64 / data.max(1) as f64,
        100.0 * o.share(rx_ns + o.sender_served_ns)
    );
    assert!(
        rx_ns as f64 >= 0.95 * data as f64,
        "receiver got {:.1} ms, less than 95% of the {:.1} ms of data receive work on CPU 1: {o:?}",
        rx_ns as f64 / 1e6,
        data as f64 / 1e6
    );
    assert_gets_all(&o, "receiver + sender", rx_ns + o.sender_served_ns);
}

/// Two receivers fed 3:1 with same-size datagrams. They poll without sleeping: sleeping receivers
/// are woken (a cross-CPU wake-up from the softirq, ~10 us here) about equally often although one
/// gets a third of the packets of the other, so the kernel's work for them would not be 3:1.
#[test]
#[ignore = "needs root and BPF"]
fn two_receivers_3_to_1() {
    let o = measure_quiet(&Scenario {
        tag: "udp31",
        v6: false,
        proto: "udp",
        ports: &[(9000, 3), (9001, 1)],
        size: 64,
        seconds: 3.0,
        hog: false,
        spin: true,
    });
    let (a, b) = (o.receivers[0], o.receivers[1]);
    assert!(
        b.2 > 5_000,
        "second receiver got only {} datagrams: {o:?}",
        b.2
    );
    let ratio = a.0 as f64 / b.0.max(1) as f64;
    eprintln!(
        "  attributed ratio {ratio:.3} (want 3 +- 10%); received {:.3}, items {:.3}",
        a.2 as f64 / b.2.max(1) as f64,
        a.1 as f64 / b.1.max(1) as f64
    );
    assert!(
        (ratio / 3.0 - 1.0).abs() <= 0.10,
        "attributed NET time ratio {ratio:.3}, want 3 +- 10%: {o:?}"
    );
    assert_gets_all(&o, "the two receivers", a.0 + b.0);
}
