//! `pkprof syscalls --calibrate`: the cost table against an independent measure, its cache and
//! bad input (an unwritable cache, a corrupt one, io_uring disabled). Each calibration measures
//! for seconds, and the profile runs need root and BPF, so all are ignored by default: run with
//! `cargo test -p pkprof --test calibrate -- --include-ignored --nocapture --test-threads=1`.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use common::*;
use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("calibrate-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `pkprof syscalls ARGS` with the cache in `cache_dir`.
fn pkprof(cache_dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(pkprof_bin())
        .env("PKPROF_CACHE_DIR", cache_dir)
        .arg("syscalls")
        .args(args)
        .output()
        .expect("pkprof runs");
    eprintln!(
        "pkprof syscalls {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `--calibrate=quick --format json`: the table.
fn calibrate(cache_dir: &Path) -> Value {
    let out = pkprof(cache_dir, &["--calibrate=quick", "--format", "json"]);
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).expect("the table is JSON")
}

fn plain_ns(table: &Value, op: &str, on: &str) -> f64 {
    table["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == op && o["on"] == on)
        .unwrap_or_else(|| panic!("no {op} on {on}"))["plain"]["median_ns"]
        .as_f64()
        .unwrap()
}

/// The table's plain pread against N preads timed here, on a page-cache file of the same kind:
/// within a factor of 3 either way (the machine may be shared; the point is that the table
/// measures what it says).
#[test]
#[ignore = "measures for seconds"]
fn the_plain_pread_cost_matches_an_independent_measure() {
    let dir = scratch("pread");
    let table = calibrate(&dir);
    let cached: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("calibration.json")).unwrap())
            .unwrap();
    assert_eq!(cached, table, "the cache holds the table printed");
    let theirs = plain_ns(&table, "pread", "file");

    let path = Path::new("/var/tmp").join(format!("pkprof-pread-{}", std::process::id()));
    std::fs::write(&path, vec![1u8; 256 * 4096]).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for i in 0..4096u64 {
            f.read_exact_at(&mut buf, (i % 256) * 4096).unwrap();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / 4096.0);
    }
    drop(f);
    std::fs::remove_file(&path).unwrap();
    eprintln!("pread: table {theirs:.0} ns, here {best:.0} ns (best of 5)");
    assert!(
        theirs / best < 3.0 && best / theirs < 3.0,
        "table {theirs:.0} ns against {best:.0} ns measured here"
    );
    // Every figure has its spread.
    for o in table["ops"].as_array().unwrap() {
        let p = &o["plain"];
        let f = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("no {k}: {o}"));
        assert!(f("p25_ns") <= f("median_ns"), "{o}");
        assert!(f("median_ns") <= f("p75_ns"), "{o}");
    }
}

/// The pipe and socket single calls are in the table (sendfile, splice, sendmmsg, recvmmsg,
/// each with its spread), and its splice figure (per 4 KiB of a 64 KiB pipe-to-pipe splice)
/// is within a factor of 3 of splices timed here.
#[test]
#[ignore = "measures for seconds"]
fn the_stream_single_calls_are_measured() {
    let dir = scratch("stream");
    let table = calibrate(&dir);
    let single = |call: &str| {
        table["single_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["call"] == call)
            .unwrap_or_else(|| panic!("no {call} in {}", table["single_calls"]))
            .clone()
    };
    for call in ["sendfile", "splice", "sendmmsg", "recvmmsg"] {
        let s = single(call);
        for side in ["plain", "single"] {
            let f = |k: &str| s[side][k].as_f64().unwrap_or_else(|| panic!("no {k}: {s}"));
            assert!(
                f("p25_ns") <= f("median_ns") && f("median_ns") <= f("p75_ns"),
                "{s}"
            );
        }
    }
    let theirs = single("splice")["single"]["median_ns"].as_f64().unwrap();

    let pipe = || {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        (fds[0], fds[1])
    };
    let ((ar, aw), (br, bw)) = (pipe(), pipe());
    let data = vec![7u8; 16 * 4096];
    let mut back = vec![0u8; 16 * 4096];
    let mut best = f64::MAX;
    for _ in 0..200 {
        assert_eq!(
            unsafe { libc::write(aw, data.as_ptr().cast(), data.len()) },
            data.len() as isize
        );
        let t = Instant::now();
        let mut left = data.len();
        while left > 0 {
            let n = unsafe {
                libc::splice(ar, std::ptr::null_mut(), bw, std::ptr::null_mut(), left, 0)
            };
            assert!(n > 0, "splice: {}", std::io::Error::last_os_error());
            left -= n as usize;
        }
        best = best.min(t.elapsed().as_nanos() as f64 / 16.0);
        let mut got = 0;
        while got < back.len() {
            let n = unsafe { libc::read(br, back[got..].as_mut_ptr().cast(), back.len() - got) };
            assert!(n > 0);
            got += n as usize;
        }
    }
    for fd in [ar, aw, br, bw] {
        unsafe { libc::close(fd) };
    }
    eprintln!("splice per 4 KiB: table {theirs:.0} ns, here {best:.0} ns (best of 200)");
    assert!(
        theirs / best < 3.0 && best / theirs < 3.0,
        "table {theirs:.0} ns against {best:.0} ns measured here"
    );
}

/// An unwritable cache: one line on stderr, the table still printed, exit 0.
#[test]
#[ignore = "measures for seconds"]
fn an_unwritable_cache_is_one_line_and_the_table_is_shown() {
    let out = pkprof(Path::new("/dev/null/pkprof"), &["--calibrate=quick"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let complaints: Vec<&str> = err.lines().filter(|l| l.contains("cannot cache")).collect();
    assert_eq!(complaints.len(), 1, "{err}");
    assert!(complaints[0].contains("/dev/null/pkprof"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("pread") && text.contains("Not cached"),
        "{text}"
    );
}

/// A corrupt cache in a profile run: one line, savings unknown, the report printed.
#[test]
#[ignore = "needs root and BPF"]
fn a_corrupt_cache_is_one_line_and_unknown_savings() {
    let dir = scratch("corrupt");
    std::fs::write(dir.join("calibration.json"), "{\"schema\": ").unwrap();
    let bin = build_workload("syscall_patterns");
    let work = scratch("corrupt-work");
    let out = pkprof(
        &dir,
        &["--", bin.to_str().unwrap(), work.to_str().unwrap(), "stats"],
    );
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.lines().filter(|l| l.contains("corrupt")).count(),
        1,
        "{err}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Time saved: unknown") && text.contains("--calibrate"),
        "{text}"
    );
}

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

/// Puts the sysctl back when dropped, also while unwinding from a failed assertion.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(SYSCTL, &self.0) {
            eprintln!("could not restore {SYSCTL} to {}: {e}", self.0);
        }
    }
}

/// With io_uring disabled the table says batched ops are unavailable, and the advice measured
/// against it never suggests a multi-call (the stats pattern is one without a table).
#[test]
#[ignore = "needs root and BPF; switches io_uring off for a few seconds"]
fn without_io_uring_no_multi_call_is_suggested() {
    let dir = scratch("disabled");
    let table = {
        let old = std::fs::read_to_string(SYSCTL).unwrap().trim().to_string();
        let _restore = Restore(old);
        std::fs::write(SYSCTL, "2").unwrap();
        calibrate(&dir)
    };
    let why = table["batched_unavailable"].as_str().expect("a reason");
    assert!(why.contains("io_uring_disabled"), "{why}");
    for o in table["ops"].as_array().unwrap() {
        assert!(o["batched"].is_null() && o["batch_fixed"].is_null(), "{o}");
    }

    let bin = build_workload("syscall_patterns");
    let work = scratch("disabled-work");
    let report = dir.join("report.json");
    let out = pkprof(
        &dir,
        &[
            "--format",
            "json",
            "-o",
            report.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            work.to_str().unwrap(),
            "stats",
        ],
    );
    assert!(out.status.success());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(report["costs"]["table"].is_object(), "the table is used");
    let clusters = report["clusters"].as_array().unwrap();
    assert!(!clusters.is_empty());
    for c in clusters {
        let kind = c["suggestion"]["kind"].as_str().unwrap();
        assert!(
            kind != "multicall" && kind != "partial_multicall",
            "a multi-call without io_uring: {c}"
        );
    }
    // The stats chain (openat, newfstatat, read, close) is left, with the reason.
    assert!(
        clusters
            .iter()
            .any(|c| c["suggestion"]["kind"] == "leave_it"
                && c["suggestion"]["why"]
                    .as_str()
                    .unwrap()
                    .contains("batched ops are unavailable")),
        "{clusters:?}"
    );
}

/// The saving in a profile run with a table: every listed suggestion but epoll and "none" has
/// an estimate or says why not; a multi-call is suggested only with a positive estimate.
#[test]
#[ignore = "needs root and BPF"]
fn suggestions_carry_their_estimated_saving() {
    let dir = scratch("estimates");
    calibrate(&dir);
    let bin = build_workload("syscall_patterns");
    let work = scratch("estimates-work");
    let report = dir.join("report.json");
    let out = pkprof(
        &dir,
        &[
            "--format",
            "json",
            "-o",
            report.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let clusters = report["clusters"].as_array().unwrap();
    assert!(!clusters.is_empty(), "no clusters");
    assert!(
        clusters
            .iter()
            .any(|c| c["saving"]["status"] == "estimated"),
        "no cluster carries an estimated saving: {clusters:?}"
    );
    for c in clusters {
        let kind = c["suggestion"]["kind"].as_str().unwrap();
        let saving = &c["saving"];
        eprintln!("{} {kind}: {saving}", c["path"]);
        assert!(saving.is_object(), "no saving: {c}");
        if kind == "multicall" || kind == "partial_multicall" {
            assert_eq!(saving["status"], "estimated", "{c}");
            assert!(saving["saved_ns"].as_i64().unwrap() > 0, "{c}");
        }
        if saving["status"] == "estimated" {
            assert!(saving["cluster_ns"].as_u64().unwrap() > 0, "{c}");
        }
    }
}
