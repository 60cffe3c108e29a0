//! Shared helpers of the root-only integration tests: build C workloads, run `pkprof top --json`
//! and read its frames.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod netns;
pub mod push_scene;
pub mod tmux;

pub fn pkprof_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pkprof"))
}

/// Compiles tests/workloads/NAME.c (with frame pointers, -O2, pthreads) and returns the binary.
pub fn build_workload(name: &str) -> PathBuf {
    build_workload_with(name, &[])
}

/// Like [`build_workload`], with extra compiler flags after the usual ones (a later flag wins:
/// `-fomit-frame-pointer` builds without frame pointers).
pub fn build_workload_with(name: &str, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workloads")
        .join(format!("{name}.c"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("workload-{name}"));
    let status = Command::new("cc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-pthread"])
        .args(flags)
        .arg("-o")
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
        let child = Command::new(pkprof_bin())
            .arg("top")
            .arg("--json")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("pkprof starts");
        Top::reading(child)
    }

    /// Like `start_with_first_frame`, with environment variables `env` set and stderr captured:
    /// its lines come on the returned receiver (and are echoed to the test's stderr).
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> (Top, Value, Receiver<String>) {
        let mut child = Command::new(pkprof_bin())
            .arg("top")
            .arg("--json")
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("pkprof starts");
        let rx = echo_stderr(&mut child, "");
        let (top, first) = Top::reading(child);
        (top, first, rx)
    }

    /// Reads `child`'s frames on a thread; waits for the first.
    fn reading(mut child: Child) -> (Top, Value) {
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

/// Reads frames until `pred` holds for one; returns it and the last row seen of every pid (rows
/// of processes that exited in between keep their final totals).
pub fn frames_until(
    top: &mut Top,
    timeout: Duration,
    mut pred: impl FnMut(&Value) -> bool,
) -> (Value, std::collections::HashMap<u64, Value>) {
    let mut last = std::collections::HashMap::new();
    let f = top.wait_for(timeout, |f| {
        for r in rows(f) {
            last.insert(r["pid"].as_u64().unwrap(), r.clone());
        }
        pred(f)
    });
    (f, last)
}

/// A row's cumulative `total.<field>[i]` (a per-chain or per-softirq array).
pub fn total(row: &Value, field: &str, i: usize) -> u64 {
    row["total"][field][i]
        .as_u64()
        .unwrap_or_else(|| panic!("total.{field}[{i}] in {row}"))
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

/// `/proc/PID/status`'s `field` (e.g. `"VmRSS:"`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// The upper median of `v` (not empty).
pub fn median(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v[v.len() / 2]
}

/// `|measured - truth| / truth`, for printing and asserting relative errors.
pub fn rel_err(measured: u64, truth: u64) -> f64 {
    (measured as f64 - truth as f64).abs() / (truth as f64).max(1.0)
}

// Independent ground truth for the attribution tests: a private tracefs instance (the kernel's
// own ftrace ring buffer, sharing nothing with pkprof's BPF programs but the tracepoints), and
// workload files on the real disk.

pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

pub fn num_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) as usize }
}

/// A directory for workload files under the target directory, asserted not to be on tmpfs (so
/// I/O there reaches the disk); removed on drop.
pub struct DiskDir(PathBuf);

impl DiskDir {
    pub fn new(name: &str) -> DiskDir {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test directory");
        let path = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
        // SAFETY: statfs fills the struct we pass for a NUL-terminated path.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statfs(path.as_ptr(), &mut st) }, 0, "statfs");
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        assert!(
            st.f_type as i64 != TMPFS_MAGIC,
            "{} is on tmpfs, not on a disk",
            dir.display()
        );
        DiskDir(dir)
    }

    pub fn file(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }
}

impl Drop for DiskDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One event of a trace: `comm-tid [cpu] flags secs.usecs: name: body`.
pub struct TraceEvent {
    pub comm: String,
    pub tid: u32,
    pub cpu: usize,
    /// Interrupt context from the trace's flags: 'h' hard IRQ, 's' softirq, 'H' both, '.' task.
    pub irq: char,
    /// CLOCK_MONOTONIC, ns (1 us resolution).
    pub ts: u64,
    pub name: String,
    pub body: String,
}

impl TraceEvent {
    pub fn kworker(&self) -> bool {
        self.comm.starts_with("kworker/")
    }

    /// The number after `key` in the body (e.g. `prev_pid=`).
    pub fn num(&self, key: &str) -> u32 {
        let after = self
            .body
            .split(key)
            .nth(1)
            .unwrap_or_else(|| panic!("{key} in {}", self.body));
        after.split(' ').next().unwrap().parse().unwrap()
    }

    /// The work_struct address of a workqueue event (`work struct=ADDR ...`, `work struct ADDR:`).
    pub fn work(&self) -> String {
        let after = self.body.strip_prefix("work struct").expect("work struct");
        after
            .trim_start_matches(['=', ' '])
            .split([':', ' '])
            .next()
            .unwrap()
            .to_owned()
    }

    /// A block event's request: "dev sector+nr", or "dev flush" for flushes (their sector reads
    /// differently at issue and completion; they complete in issue order per device).
    pub fn request(&self) -> String {
        let t: Vec<&str> = self.body.split_whitespace().collect();
        if t[1].starts_with('F') {
            return format!("{} flush", t[0]);
        }
        let p = t
            .iter()
            .position(|w| w.starts_with('('))
            .expect("cmd field");
        format!("{} {}+{}", t[0], t[p + 1], t[p + 3])
    }
}

/// A private tracefs instance recording `events` ("group/name", filter or "") on the `mono`
/// clock from creation; removed on drop.
pub struct Trace(PathBuf);

impl Trace {
    pub fn start(name: &str, events: &[(&str, &str)]) -> Trace {
        let dir = format!(
            "/sys/kernel/tracing/instances/pkprof-{name}-{}",
            std::process::id()
        );
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).expect("create a tracefs instance (root, tracefs mounted)");
        let t = Trace(PathBuf::from(dir));
        t.write("tracing_on", "0");
        t.write("trace_clock", "mono");
        t.write("buffer_size_kb", "32768");
        for (ev, filter) in events {
            if !filter.is_empty() {
                t.write(&format!("events/{ev}/filter"), filter);
            }
            t.write(&format!("events/{ev}/enable"), "1");
        }
        t.write("trace", "");
        t.write("tracing_on", "1");
        t
    }

    fn write(&self, file: &str, what: &str) {
        std::fs::write(self.0.join(file), what)
            .unwrap_or_else(|e| panic!("write {what:?} to {file}: {e}"));
    }

    /// Stops recording and returns every event in order, asserting the ring buffer dropped none.
    pub fn stop_and_read(&self) -> Vec<TraceEvent> {
        self.write("tracing_on", "0");
        for cpu in 0..num_cpus() {
            let stats =
                std::fs::read_to_string(self.0.join(format!("per_cpu/cpu{cpu}/stats"))).unwrap();
            assert!(
                stats.lines().any(|l| l == "overrun: 0"),
                "trace lost events:\n{stats}"
            );
        }
        let re = regex::Regex::new(
            r"^\s*(.*)-(\d+)\s+\[(\d+)\]\s+(\S{4,})\s+(\d+)\.(\d{6}): (\w+): (.*)$",
        );
        let re = re.unwrap();
        let text = std::fs::read_to_string(self.0.join("trace")).expect("read trace");
        let parse = |l: &str| {
            let c = re
                .captures(l)
                .unwrap_or_else(|| panic!("unparsed trace line {l:?}"));
            let n = |i: usize| c[i].parse::<u64>().unwrap();
            TraceEvent {
                comm: c[1].to_owned(),
                tid: n(2) as u32,
                cpu: n(3) as usize,
                irq: c[4].chars().nth(2).unwrap(),
                ts: n(5) * 1_000_000_000 + n(6) * 1000,
                name: c[7].to_owned(),
                body: c[8].to_owned(),
            }
        };
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(parse)
            .collect()
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("tracing_on"), "0");
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Runs a command to completion with stdin closed, killing it after `timeout`.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> std::process::Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) on our child, still unreaped (its waiter has not returned).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{cmd:?} did not finish within {timeout:?}");
        }
    }
}

/// Polls `f` every 100 ms until it gives a value (panics after `timeout`).
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Echoes `child`'s piped stderr to the test's stderr, each line after `prefix`, on a thread of
/// its own, and hands every line to the returned receiver (lines nobody waits for are dropped).
pub fn echo_stderr(child: &mut Child, prefix: &'static str) -> Receiver<String> {
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{prefix}{line}");
            let _ = tx.send(line);
        }
    });
    rx
}

/// A `pkprof agent` started by a test, its stderr echoed and handed over line by line;
/// SIGKILLed on drop if still running.
pub struct Agent {
    pub child: Child,
    pub lines: Receiver<String>,
}

impl Agent {
    /// Starts `pkprof agent ARGS`.
    pub fn start<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Agent {
        let mut child = Command::new(pkprof_bin())
            .arg("agent")
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("pkprof agent starts");
        let lines = echo_stderr(&mut child, "agent: ");
        Agent { child, lines }
    }

    /// Waits for the start line (at most `timeout`) and returns the `/metrics` address it names,
    /// if any.
    pub fn wait_started(&self, timeout: Duration) -> Option<String> {
        let line = self
            .lines
            .recv_timeout(timeout)
            .expect("the agent's start line");
        assert!(line.contains("agent sampling at"), "{line}");
        line.split("metrics: http://")
            .nth(1)
            .map(|s| s.trim_end_matches("/metrics").to_string())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits on `lines` (from [`echo_stderr`]) for one containing `needle`; panics with `what` when
/// none comes within `timeout` between lines.
pub fn wait_for_line(lines: &Receiver<String>, needle: &str, what: &str, timeout: Duration) {
    loop {
        let line = lines.recv_timeout(timeout).expect(what);
        if line.contains(needle) {
            return;
        }
    }
}

/// An HTTP/1.0 GET of `path` (with its query) on loopback `port`: the status code and the body.
pub fn http_request(port: u16, path: &str) -> std::io::Result<(u32, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

/// The body of an HTTP/1.0 GET of `path` on loopback `port` (a pkprof `/metrics`); panics when
/// the server cannot be reached.
pub fn http_get(port: u16, path: &str) -> String {
    http_request(port, path)
        .unwrap_or_else(|e| panic!("GET {path} on port {port}: {e}"))
        .1
}
