//! `pkprof top --syscalls`: exact per-syscall counts and the measured user/kernel split, against
//! a workload that makes a known number of syscalls and then spins in user space.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{build_workload, row_of, Top};

const CALLS: u64 = 200_000;

#[test]
#[ignore = "needs root and BPF"]
fn syscall_counts_are_exact_and_user_time_is_user() {
    let mut child = Command::new(build_workload("sys_mix"))
        .args([CALLS.to_string(), "2".to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut top = Top::start(&["--syscalls", "-d", "0.5", "-p", &pid.to_string()]);
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();

    // Read frames until the workload's row is the exited one: its final totals.
    let mut last_syscalls = None;
    let frame = top.wait_for(Duration::from_secs(20), |f| {
        if let Some(s) = f["syscalls"].as_array() {
            if let Some(g) = s.iter().find(|s| s["pid"] == pid && s["name"] == "getppid") {
                last_syscalls = Some(g["count"].as_u64().unwrap());
            }
        }
        row_of(f, pid).is_some_and(|r| r["exited"] == true)
    });
    assert!(child.wait().unwrap().success());
    let row = row_of(&frame, pid).unwrap();
    let t = &row["total"];
    let (user, sys, unsplit, task) = (
        t["user_ns"].as_u64().unwrap(),
        t["sys_ns"].as_u64().unwrap(),
        t["unsplit_ns"].as_u64().unwrap(),
        t["task_ns"].as_u64().unwrap(),
    );
    eprintln!(
        "syscalls: getppid counted {last_syscalls:?} (made {CALLS}); user {:.1} ms, sys {:.1} ms, unsplit {:.1} ms",
        user as f64 / 1e6,
        sys as f64 / 1e6,
        unsplit as f64 / 1e6
    );
    assert_eq!(
        last_syscalls,
        Some(CALLS),
        "exact count of the getppid calls"
    );
    assert_eq!(
        user + sys + unsplit,
        task,
        "the split adds up to the task time"
    );
    // The 2 s spin makes no syscall: nearly all of it is user time; the 200,000 calls are
    // kernel time (each at least ~100 ns), so sys cannot be near zero.
    assert!(
        user as f64 > 0.9 * 2e9,
        "the user-space spin is user time: {user} ns"
    );
    assert!(sys > CALLS * 50, "the syscalls are kernel time: {sys} ns");
    assert!(
        unsplit < task / 100,
        "the mode is known for nearly all of it: {unsplit} ns unsplit"
    );
    top.stop();
}
