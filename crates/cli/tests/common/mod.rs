//! Shared helpers of the root-only integration tests: build C workloads, run `pkprof top --json`
//! and read its frames.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::Value;

pub fn pkprof_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pkprof"))
}

/// Compiles tests/workloads/NAME.c (with frame pointers, -O2, pthreads) and returns the binary.
pub fn build_workload(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workloads")
        .join(format!("{name}.c"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("workload-{name}"));
    let status = Command::new("cc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("cc runs");
    assert!(status.success(), "compiling {}", src.display());
    out
}

/// A running `pkprof top --json`, its frames parsed line by line on a reader thread.
pub struct Top {
    child: Child,
    frames: Receiver<Value>,
}

impl Top {
    /// Starts `pkprof top --json` with extra arguments and waits for its first frame (so the BPF
    /// programs are attached when this returns).
    pub fn start(args: &[&str]) -> Top {
        Top::start_with_first_frame(args).0
    }

    /// Like `start`, but also returns the first frame (its `interval_s` runs from attach).
    pub fn start_with_first_frame(args: &[&str]) -> (Top, Value) {
        let mut child = Command::new(pkprof_bin())
            .arg("top")
            .arg("--json")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("pkprof starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).expect("pkprof prints valid JSON lines");
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut top = Top { child, frames: rx };
        let first = top
            .next_frame(Duration::from_secs(20))
            .expect("first frame from pkprof top");
        (top, first)
    }

    pub fn next_frame(&mut self, timeout: Duration) -> Option<Value> {
        self.frames.recv_timeout(timeout).ok()
    }

    /// Reads frames until `pred` holds for one (returned) or the timeout passes (panics).
    pub fn wait_for(&mut self, timeout: Duration, mut pred: impl FnMut(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let f = self
                .next_frame(left)
                .expect("pkprof top stopped or timed out before the expected frame");
            if pred(&f) {
                return f;
            }
        }
    }

    pub fn stop(mut self) {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc_kill(self.child.id() as i32, 2) };
        let _ = self.child.wait();
    }
}

impl Drop for Top {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Rows of a frame.
pub fn rows(frame: &Value) -> &Vec<Value> {
    frame["rows"].as_array().expect("frame has rows")
}

/// The row of this pid (or tid, with -H), if present.
pub fn row_of(frame: &Value, id: u32) -> Option<&Value> {
    rows(frame)
        .iter()
        .find(|r| r["tid"].as_u64().unwrap_or(r["pid"].as_u64().unwrap()) == id as u64)
}

/// Cumulative on-CPU ns of a row: own task time plus interrupt work billed to it.
pub fn on_cpu_ns(row: &Value) -> u64 {
    let t = &row["total"];
    t["task_ns"].as_u64().unwrap()
        + t["hardirq_ns"].as_u64().unwrap()
        + t["softirq_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>()
}

/// A workload process driven over its stdin/stdout: lines are read on a thread so every wait has a
/// timeout. Killed and reaped on drop.
pub struct Proc {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: Receiver<String>,
    what: String,
}

impl Proc {
    /// Starts `cmd` with piped stdin and stdout (stderr inherited).
    pub fn spawn(mut cmd: Command) -> Proc {
        let what = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            what,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one line to the workload's stdin (e.g. the start gate).
    pub fn send_line(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .expect("write to workload");
    }

    /// Closes the workload's stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the next stdout line starting with `tag` (other lines are echoed) and returns its
    /// remaining whitespace-separated words.
    pub fn expect(&mut self, tag: &str, timeout: Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no `{tag}` line from {} in {timeout:?}", self.what));
            let mut words = line.split_whitespace();
            if words.next() == Some(tag) {
                return words.map(str::to_owned).collect();
            }
            eprintln!("workload: {line}");
        }
    }

    /// Waits for the process to exit (reaping it) and asserts it succeeded.
    pub fn wait(&mut self, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                assert!(status.success(), "{} failed: {status}", self.what);
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} still running after {timeout:?}",
                self.what
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A command pinned nowhere in particular; shorthand for `Command::new(bin).args(args)`.
pub fn cmd(bin: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.args(args);
    c
}

/// A counter as u64 (panics with the field name when absent).
pub fn u64_of(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("`{field}` is not a u64 in {v}"))
}

/// `|measured - truth| / truth`, for printing and asserting relative errors.
pub fn rel_err(measured: u64, truth: u64) -> f64 {
    (measured as f64 - truth as f64).abs() / (truth as f64).max(1.0)
}
