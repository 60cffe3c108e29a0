//! A kernel without a tracepoint one chain needs turns off that chain alone (root and BPF needed):
//! `cargo test -p pkprof --test chain_off -- --include-ignored --nocapture --test-threads=1`
//!
//! The kernel is made to look as if it lacked `block:block_rq_issue` through the preflight's
//! test-only `PKPROF_TEST_HIDE_TRACEPOINTS` (crates/collect/src/preflight.rs): the same path a
//! kernel really without it takes, from the tracepoint look-up on. pkprof must say so in one line
//! naming the chain and what goes unattributed, bill no block work to anyone (the completions'
//! softirq time is KERNEL), and still bill UDP receive work to its reader through the network
//! chain.

mod common;

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::netns::Link;
use common::*;
use serde_json::Value;

const SEC: Duration = Duration::from_secs(1);
const NET: usize = 0; // served_ns index of the network receive chain
const BLOCK: usize = 1; // served_ns index of the block I/O chain
const BLOCK_SOFTIRQ: usize = 4; // softirq vector

const OFF_LINE: &str = "pkprof: block I/O chain off: tracepoint block:block_rq_issue missing; \
                        block completions go to KERNEL";
/// Sum over a frame's CPUs of one figure of their totals.
fn cpu_sum(frame: &Value, f: impl Fn(&Value) -> u64) -> u64 {
    frame["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| f(&c["total"]))
        .sum()
}

/// The lines pkprof printed on stderr within `wait`.
fn stderr_lines(rx: &Receiver<String>, wait: Duration) -> Vec<String> {
    let end = Instant::now() + wait;
    let mut lines = Vec::new();
    while let Ok(l) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        lines.push(l);
    }
    lines
}

#[test]
#[ignore = "needs root and BPF"]
fn a_missing_block_tracepoint_turns_off_the_block_chain_alone() {
    // Block: 4 KiB O_DIRECT reads for 3 s, as attribution_io's dd test runs them.
    let dir = DiskDir::new("chain-off");
    let mut reader = Proc::spawn(cmd(
        &build_workload("io_direct_read"),
        &[&dir.file("read.dat"), "3"],
    ));
    reader.expect("ready", 120 * SEC);
    std::thread::sleep(Duration::from_millis(200)); // the setup's last completions
    let (mut top, first, stderr) = Top::start_with_env(
        &["-d", "0.5"],
        &[("PKPROF_TEST_HIDE_TRACEPOINTS", "block:block_rq_issue")],
    );
    let said = stderr_lines(&stderr, SEC);
    let off: Vec<&String> = said.iter().filter(|l| l.contains("chain off")).collect();
    assert_eq!(
        off,
        [OFF_LINE],
        "one line names the chain turned off, and only it: {said:?}"
    );

    let pid = reader.pid();
    reader.send_line("go");
    reader.expect("start", 5 * SEC);
    let end = reader.expect("end", 30 * SEC);
    reader.wait(10 * SEC);
    let (after_io, io_rows) = frames_until(&mut top, 10 * SEC, |f| {
        row_of(f, pid).is_some_and(|r| r["exited"] == true)
    });
    let reads: u64 = end[1].parse().unwrap();
    let block = |t: &Value| t["softirq_ns"][BLOCK_SOFTIRQ].as_u64().unwrap();
    let kernel_irq = |t: &Value| u64_of(t, "kernel_irq_ns");
    let block_ns = cpu_sum(&after_io, block) - cpu_sum(&first, block);
    let kernel_ns = cpu_sum(&after_io, kernel_irq) - cpu_sum(&first, kernel_irq);
    let billed_block: u64 = io_rows.values().map(|r| total(r, "served_ns", BLOCK)).sum();
    let billed_items: u64 = io_rows
        .values()
        .map(|r| total(r, "served_items", BLOCK))
        .sum();
    eprintln!(
        "chain_off: {reads} reads; BLOCK softirq {:.3} ms, KERNEL interrupt time {:.3} ms, \
         billed as block work {billed_block} ns ({billed_items} items)",
        block_ns as f64 / 1e6,
        kernel_ns as f64 / 1e6
    );
    assert!(
        reads >= 1000,
        "too few reads ({reads}) to judge the block chain"
    );
    assert!(block_ns > 0, "the reads' completions ran no BLOCK softirq");
    assert_eq!(
        (billed_block, billed_items),
        (0, 0),
        "the block chain is off: nobody is billed block work"
    );
    assert!(
        kernel_ns >= block_ns,
        "the BLOCK softirq time ({block_ns} ns) goes to KERNEL ({kernel_ns} ns of interrupt time)"
    );

    // Network: one UDP receiver in a namespace pair, as attribution_net's udp test runs it.
    let link = Link::new("choff", false);
    let wait = 15 * SEC;
    let mut receiver = Proc::spawn(cmd(
        &build_workload("net_recv"),
        &[&link.rx.0, "udp", link.rx_addr, "9000", "0"],
    ));
    receiver.expect("ready", wait);
    let mut sender = Proc::spawn(cmd(
        &build_workload("net_send"),
        &[
            &link.tx.0,
            "udp",
            link.rx_addr,
            "9000:1",
            "0",
            "2",
            "64",
            "0",
        ],
    ));
    sender.expect("sent", wait);
    sender.wait(wait);
    std::thread::sleep(Duration::from_millis(100));
    receiver.close_stdin();
    let got: u64 = receiver.expect("received", wait)[0].parse().unwrap();
    receiver.wait(wait);
    let rpid = receiver.pid();
    let (_, net_rows) = frames_until(&mut top, 10 * SEC, |f| {
        row_of(f, rpid).is_some_and(|r| r["exited"] == true)
    });
    top.stop();
    let row = &net_rows[&u64::from(rpid)];
    let (net_ns, net_items) = (
        total(row, "served_ns", NET),
        total(row, "served_items", NET),
    );
    eprintln!(
        "chain_off: receiver got {got} datagrams, billed {:.3} ms of receive work ({net_items} items)",
        net_ns as f64 / 1e6
    );
    assert!(got > 10_000, "receiver got only {got} datagrams");
    assert!(
        net_ns > 0 && net_items * 2 >= got,
        "the network chain still bills the receiver its receive work: {net_ns} ns, \
         {net_items} items for {got} datagrams"
    );
}
