//! How `pkprof top` fails: every refusal is one line on stderr (`pkprof: CAUSE ...FIX`), a non-zero
//! exit code, no panic text, and nothing on stdout. Also the one way it ends by itself: every
//! watched process has exited (its last row is shown, then exit code 0).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{build_workload, pkprof_bin, row_of, run_with_timeout};
use serde_json::Value;

/// Runs `pkprof top ARGS` expecting a refusal before anything is loaded, and returns the one
/// stderr line. `must_name` are fragments the line must hold (the cause and the fix).
fn refusal(cmd: &mut Command, must_name: &[&str]) -> String {
    let started = Instant::now();
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let what = format!("{cmd:?}: status {}, stderr {stderr:?}", out.status);
    assert!(!out.status.success(), "must fail: {what}");
    assert!(
        out.status.code().is_some(),
        "exits, not killed by a signal: {what}"
    );
    assert!(
        !stderr.contains("panicked") && !stdout.contains("panicked"),
        "no panic: {what}"
    );
    assert!(
        stdout.is_empty(),
        "nothing on stdout: {what}, stdout {stdout:?}"
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "exactly one line on stderr: {what}"
    );
    assert!(stderr.ends_with('\n'), "{what}");
    assert!(stderr.starts_with("pkprof: "), "{what}");
    for m in must_name {
        assert!(stderr.contains(m), "stderr names {m:?}: {what}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused at once: {what}"
    );
    stderr
}

fn pkprof_top(args: &[&str]) -> Command {
    let mut c = Command::new(pkprof_bin());
    c.arg("top").args(args);
    c
}

/// A copy of pkprof in a fresh world-readable directory, so the nobody user can run it (the build
/// tree may sit under a directory only root can enter). Removed when dropped.
struct PublicCopy(PathBuf);

impl PublicCopy {
    fn new() -> PublicCopy {
        let dir = std::env::temp_dir().join(format!("pkprof-errors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.join("pkprof");
        std::fs::copy(pkprof_bin(), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        PublicCopy(dir)
    }

    fn bin(&self) -> PathBuf {
        self.0.join("pkprof")
    }
}

impl Drop for PublicCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// As the nobody user with no capabilities when we are root; as ourselves otherwise (a normal
/// user has neither CAP_BPF nor CAP_PERFMON).
fn unprivileged(bin: &Path) -> Command {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Command::new(bin);
    }
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ])
    .arg(bin);
    c
}

#[test]
fn unprivileged_user_is_told_what_is_needed() {
    let copy = PublicCopy::new();
    let mut cmd = unprivileged(&copy.bin());
    cmd.args(["top", "--batch", "-n", "1"]);
    let line = refusal(
        &mut cmd,
        &["permission denied", "root", "CAP_BPF", "CAP_PERFMON"],
    );
    // The fix is spelled out, not only the cause.
    assert!(line.contains("sudo") || line.contains("setcap"), "{line}");
}

#[test]
fn pid_that_does_not_exist() {
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = (2..pid_max)
        .rev()
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .unwrap()
        .to_string();
    refusal(&mut pkprof_top(&["--batch", "-p", &pid]), &[&pid]);
    // One bad PID among good ones is still named.
    let list = format!("1,{pid}");
    refusal(&mut pkprof_top(&["--json", "-p", &list]), &[&pid]);
}

#[test]
fn invalid_comm_regex() {
    refusal(
        &mut pkprof_top(&["--batch", "--comm", "("]),
        &["--comm", "regular expression"],
    );
}

#[test]
fn cgroup_that_does_not_exist() {
    refusal(
        &mut pkprof_top(&["--batch", "--cgroup", "/nonexistent"]),
        &["/nonexistent"],
    );
}

#[test]
fn zero_delay() {
    refusal(&mut pkprof_top(&["--batch", "-d", "0"]), &["0.05"]);
    refusal(&mut pkprof_top(&["--batch", "-d", "soon"]), &["soon"]);
}

#[test]
fn interactive_view_needs_a_terminal() {
    // stdout is a pipe here: without --batch or --json there is nothing sensible to draw.
    refusal(&mut pkprof_top(&[]), &["terminal", "--batch", "--json"]);
}

#[test]
#[ignore = "needs root and BPF"]
fn watched_process_exiting_ends_the_run() {
    // Busy for 1.5 s, then exits; reaped at once by the waiting thread, so /proc/PID goes away
    // (an unreaped zombie would keep it).
    let mut child = Command::new(build_workload("serve_busy"))
        .arg("1.5")
        .spawn()
        .unwrap();
    let pid = child.id();
    let reaper = std::thread::spawn(move || child.wait().unwrap());
    let out = run_with_timeout(
        &mut pkprof_top(&["--json", "-d", "0.25", "-p", &pid.to_string()]),
        Duration::from_secs(30),
    );
    assert!(reaper.join().unwrap().success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pkprof ends by itself with 0: {out:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let frames: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let ours: Vec<&Value> = frames.iter().filter_map(|f| row_of(f, pid)).collect();
    assert!(
        ours.len() >= 2,
        "the process is shown while it runs: {frames:?}"
    );
    let (last, before) = ours.split_last().unwrap();
    assert_eq!(
        last["exited"], true,
        "its last row is marked exited: {last}"
    );
    assert!(
        before.iter().all(|r| r["exited"] == false),
        "exited once, at the end"
    );
    // Nothing for it after the exited row, and the run did not go on long after.
    let last_frame = frames
        .iter()
        .rposition(|f| row_of(f, pid).is_some())
        .unwrap();
    assert!(
        frames.len() - last_frame <= 2,
        "{} frames after the exit",
        frames.len() - last_frame - 1
    );
    // It ran busy for 1.5 s: its cumulative time is most of that.
    let total_s = common::on_cpu_ns(last) as f64 / 1e9;
    assert!(
        (0.1..=1.6).contains(&total_s),
        "cumulative {total_s} s for a 1.5 s busy loop"
    );
}
