//! The remote outputs of `pkprof top`, end to end: a real Prometheus server scraping `--listen`,
//! the `/stream` JSON lines, `--udp` datagrams, and the refusal of a non-loopback `--listen`
//! without `--allow-remote`. Everything stays on loopback.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{build_workload, http_request, pkprof_bin, run_with_timeout, wait_for};
use serde_json::Value;

/// A child process stopped (SIGTERM, then SIGKILL after 3 s) and reaped when dropped, so a failing
/// assertion never leaves pkprof, Prometheus or a workload behind.
struct Guard(Child);

impl Guard {
    fn spawn(cmd: &mut Command) -> Guard {
        Guard(
            cmd.spawn()
                .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}")),
        )
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: kill(2) on our own, not yet reaped, child.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// A temporary directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("pkprof-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback TCP port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `pkprof top --batch` serving on a fresh loopback port, extra arguments appended.
fn pkprof_listening(port: u16, extra: &[&str]) -> Guard {
    Guard::spawn(
        Command::new(pkprof_bin())
            .args(["top", "--batch", "--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdout(Stdio::null()),
    )
}

/// Percent-encoding of a query parameter value.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query against Prometheus's HTTP API: (labels, value) of each result.
fn prom_query(port: u16, q: &str) -> Vec<(Value, f64)> {
    let Ok((200, body)) = http_request(port, &format!("/api/v1/query?query={}", encode(q))) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("Prometheus answered non-JSON ({e}): {body}"));
    assert_eq!(v["status"], "success", "query {q}: {body}");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["metric"].clone(),
                r["value"][1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// The kernel's own figure: CPU time the process's threads ran so far (first field of
/// /proc/PID/schedstat is the main thread's; this workload has one thread).
fn schedstat_s(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    s.split_whitespace().next().unwrap().parse::<u64>().unwrap() as f64 / 1e9
}

/// A real Prometheus server scraping pkprof on `pk_port` every `interval`, storing in `dir`
/// (its log in `dir/prometheus.log`): the server and its HTTP port.
fn start_prometheus(dir: &TempDir, job: &str, pk_port: u16, interval: &str) -> (Guard, u16) {
    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n  evaluation_interval: {interval}\n\
             scrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: ['127.0.0.1:{pk_port}']\n"
        ),
    )
    .unwrap();
    let prom_port = free_port();
    let log = std::fs::File::create(dir.0.join("prometheus.log")).unwrap();
    let prom = Guard::spawn(
        Command::new("/usr/bin/prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.0.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    );
    (prom, prom_port)
}

#[test]
#[ignore = "needs root and BPF"]
fn prometheus_scrapes_a_busy_workload() {
    let busy = Guard::spawn(Command::new(build_workload("serve_busy")).arg("60"));
    let wpid = busy.pid();
    let pk_port = free_port();
    // All processes since attach fit well within 100 series, whatever else runs on the machine.
    let _pk = pkprof_listening(pk_port, &["-d", "0.5", "--metrics-top", "100"]);
    wait_for(
        "pkprof's first frame on /metrics",
        Duration::from_secs(30),
        || {
            http_request(pk_port, "/metrics")
                .ok()
                .filter(|(c, b)| *c == 200 && b.contains("pkprof_cpu_seconds_total{"))
        },
    );

    let dir = TempDir::new("prometheus");
    let job = "pkprof_serve_test";
    let (mut prom, prom_port) = start_prometheus(&dir, job, pk_port, "1s");
    let prom_log = || std::fs::read_to_string(dir.0.join("prometheus.log")).unwrap_or_default();

    let up = format!("up{{job=\"{job}\"}}");
    let series = format!("pkprof_cpu_seconds_total{{job=\"{job}\",pid=\"{wpid}\",kind=\"own\"}}");
    let mut seen: Vec<f64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 3 || seen[seen.len() - 1] <= 1.0 {
        if let Ok(Some(st)) = prom.0.try_wait() {
            panic!("prometheus exited ({st}):\n{}", prom_log());
        }
        assert!(
            Instant::now() < deadline,
            "no growing series {series} above 1 s within 60 s; values seen {seen:?}; up = {:?}\nprometheus log:\n{}",
            prom_query(prom_port, &up),
            prom_log()
        );
        std::thread::sleep(Duration::from_secs(1));
        let r = prom_query(prom_port, &series);
        if let Some((labels, v)) = r.first() {
            assert_eq!(r.len(), 1, "one series for the workload: {r:?}");
            assert!(
                labels["comm"]
                    .as_str()
                    .unwrap()
                    .starts_with("workload-serve"),
                "{labels}"
            );
            if seen.last() != Some(v) {
                seen.push(*v);
            }
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "the counter only grows: {seen:?}"
    );
    // pkprof counts since it attached, so never more than what the kernel says the process ran.
    let scraped = *seen.last().unwrap();
    let kernel = schedstat_s(wpid);
    assert!(
        scraped <= kernel + 0.01,
        "scraped {scraped} s, kernel says the process ran {kernel} s"
    );
    let ups = prom_query(prom_port, &up);
    assert_eq!(ups.len(), 1, "{ups:?}");
    assert_eq!(ups[0].1, 1.0, "the pkprof target is up");
    // The other families made it through Prometheus's parser too.
    for q in [
        "pkprof_cpu_mode_seconds_total",
        "pkprof_lost_events_total",
        "pkprof_self_rss_bytes",
    ] {
        assert!(
            !prom_query(prom_port, &format!("{q}{{job=\"{job}\"}}")).is_empty(),
            "{q} scraped"
        );
    }
    let other = prom_query(
        prom_port,
        &format!("pkprof_cpu_seconds_total{{job=\"{job}\",pid=\"other\"}}"),
    );
    assert!(!other.is_empty(), "the other row is exported");
}

/// Starts 20 threads, lets them finish, every 0.5 s: a process whose threads come and go.
const THREAD_CHURN_PY: &str = "
import threading, time
def work():
    sum(range(20000))
while True:
    ts = [threading.Thread(target=work) for _ in range(20)]
    for t in ts: t.start()
    for t in ts: t.join()
    time.sleep(0.5)
";

/// Under process and thread churn (a shell spawning processes in a loop, python3 starting 20
/// threads every 0.5 s) every counter pkprof exports stays monotonic, as the real Prometheus sees
/// it: `resets()` finds no series that went down. The python3 process's total once fell in 7 of
/// 24 scrapes: reads of the thread table stopped part way, so its main thread was missing and it
/// looked exited.
#[test]
#[ignore = "needs root and BPF"]
fn prometheus_counters_never_reset_under_churn() {
    let _spawner = Guard::spawn(
        Command::new("sh")
            .args(["-c", "while :; do /bin/true; done"])
            .stdout(Stdio::null()),
    );
    let threads = Guard::spawn(Command::new("python3").args(["-c", THREAD_CHURN_PY]));
    let py = threads.pid();
    let pk_port = free_port();
    let _pk = pkprof_listening(pk_port, &["-d", "0.5"]);
    let metrics = wait_for(
        "pkprof's first frame on /metrics",
        Duration::from_secs(30),
        || {
            http_request(pk_port, "/metrics")
                .ok()
                .filter(|(c, b)| *c == 200 && b.contains("pkprof_cpu_seconds_total{"))
                .map(|(_, b)| b)
        },
    );
    // Every counter family pkprof exports.
    let counters: Vec<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .map(str::to_string)
        .collect();
    for want in [
        "pkprof_cpu_seconds_total",
        "pkprof_cpu_mode_seconds_total",
        "pkprof_softirq_seconds_total",
        "pkprof_lost_events_total",
    ] {
        assert!(counters.iter().any(|c| c == want), "{want} in {counters:?}");
    }

    let dir = TempDir::new("prometheus-churn");
    let job = "pkprof_churn_test";
    let (mut prom, prom_port) = start_prometheus(&dir, job, pk_port, "500ms");
    let prom_log = || std::fs::read_to_string(dir.0.join("prometheus.log")).unwrap_or_default();
    let samples = format!(
        "count_over_time(pkprof_cpu_seconds_total{{job=\"{job}\",pid=\"{py}\",kind=\"own\"}}[10m])"
    );
    // About 25 s of scrapes with the python3 process in its own series.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(Some(st)) = prom.0.try_wait() {
            panic!("prometheus exited ({st}):\n{}", prom_log());
        }
        let n = prom_query(prom_port, &samples)
            .first()
            .map_or(0.0, |(_, v)| *v);
        if n >= 50.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "python3 (pid {py}) had {n} samples of its own series after 90 s\nprometheus log:\n{}",
            prom_log()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let mut reset = Vec::new();
    for c in &counters {
        let all = prom_query(prom_port, &format!("{c}{{job=\"{job}\"}}"));
        assert!(!all.is_empty(), "{c} scraped");
        reset.extend(prom_query(
            prom_port,
            &format!("resets({c}{{job=\"{job}\"}}[10m]) > 0"),
        ));
    }
    assert!(
        reset.is_empty(),
        "{} series went down (labels, resets): {reset:#?}",
        reset.len()
    );
}

/// Reads one `\n`-terminated line, failing the test on timeout or end of stream.
fn read_line(r: &mut impl BufRead, what: &str) -> String {
    let mut line = String::new();
    let n = r
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("reading {what}: {e}"));
    assert!(n > 0, "stream ended before {what}");
    line
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Reads `/stream` over HTTP/1.0 (body until close) or HTTP/1.1 (chunked) and checks three frames:
/// valid JSON objects with rows, one per line, new each time, and each sent as soon as it was made.
fn check_stream(port: u16, http: &str, wpid: u32) {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        &stream,
        "GET /stream HTTP/{http}\r\nHost: 127.0.0.1\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(&stream);
    let status = read_line(&mut r, "the status line");
    assert!(
        status.starts_with("HTTP/1.") && status.contains(" 200 "),
        "{status}"
    );
    let mut headers = String::new();
    loop {
        let h = read_line(&mut r, "the headers");
        if h == "\r\n" {
            break;
        }
        headers += &h.to_ascii_lowercase();
    }
    assert!(
        headers.contains("content-type: application/x-ndjson"),
        "{headers}"
    );
    let chunked = headers.contains("transfer-encoding: chunked");
    assert_eq!(
        chunked,
        http == "1.1",
        "chunked exactly for HTTP/1.1: {headers}"
    );
    let mut body: Box<dyn BufRead> = if chunked {
        Box::new(BufReader::new(Dechunk { inner: r, left: 0 }))
    } else {
        Box::new(r)
    };
    let mut times = Vec::new();
    for i in 0..3 {
        let line = read_line(&mut body, "a JSON frame");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("frame {i} is not JSON ({e}): {line}"));
        let rows = v["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("frame {i} has no rows: {line}"));
        assert!(
            rows.iter().any(|r| r["pid"] == wpid),
            "the watched workload is in frame {i}: {line}"
        );
        assert!(!v["cpus"].as_array().unwrap().is_empty());
        let made = v["unix_s"].as_f64().unwrap();
        // Small frames once sat in an 8 KiB buffer for several refreshes.
        let late = unix_now() - made;
        assert!(
            late < 1.0,
            "frame {i} arrived {late:.2} s after it was made ({http})"
        );
        times.push(made);
    }
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "new frames, not one repeated: {times:?}"
    );
}

/// The body of a chunked HTTP/1.1 response (RFC 9112 section 7.1), without trailers.
struct Dechunk<R> {
    inner: R,
    left: usize,
}

impl<R: BufRead> Read for Dechunk<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            let size = read_line(&mut self.inner, "a chunk size");
            let size = size.trim_end().split(';').next().unwrap();
            self.left = usize::from_str_radix(size, 16)
                .unwrap_or_else(|e| panic!("chunk size {size:?}: {e}"));
            if self.left == 0 {
                return Ok(0);
            }
        }
        let want = out.len().min(self.left);
        let n = self.inner.read(&mut out[..want])?;
        self.left -= n;
        if self.left == 0 {
            assert_eq!(read_line(&mut self.inner, "a chunk end"), "\r\n");
        }
        Ok(n)
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn stream_sends_each_json_frame_at_once() {
    let busy = Guard::spawn(Command::new(build_workload("serve_busy")).arg("60"));
    let port = free_port();
    // One watched process: frames of ~2 KB, far below any transfer buffer.
    let _pk = pkprof_listening(port, &["-d", "0.5", "-p", &busy.pid().to_string()]);
    wait_for("pkprof's first frame", Duration::from_secs(30), || {
        http_request(port, "/metrics")
            .ok()
            .filter(|(c, b)| *c == 200 && b.contains("pkprof_cpu_seconds_total{"))
    });
    check_stream(port, "1.1", busy.pid());
    check_stream(port, "1.0", busy.pid());
}

#[test]
#[ignore = "needs root and BPF"]
fn udp_sends_text_frames() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let dest = sock.local_addr().unwrap().to_string();
    let out = run_with_timeout(
        Command::new(pkprof_bin()).args(["top", "--batch", "-n", "2", "-d", "0.5", "--udp", &dest]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "pkprof: {out:?}");
    let mut buf = vec![0u8; 65_536];
    let mut frames = Vec::new();
    for _ in 0..2 {
        let (n, from) = sock.recv_from(&mut buf).expect("a datagram from pkprof");
        assert!(from.ip().is_loopback());
        frames.push(String::from_utf8(buf[..n].to_vec()).expect("UTF-8 text"));
    }
    let cpus = std::thread::available_parallelism().unwrap().get();
    for f in &frames {
        assert!(f.starts_with("pkprof top - "), "{f}");
        assert!(
            f.lines().any(|l| l.trim_start().starts_with("PID COMMAND")),
            "{f}"
        );
        assert!(f.contains("%Cpu0"), "{f}");
        let cpu_lines = f.lines().filter(|l| l.starts_with("%Cpu")).count();
        assert!(
            cpu_lines >= cpus,
            "{cpu_lines} CPU lines for {cpus} online CPUs:\n{f}"
        );
    }
    // Each datagram holds exactly one frame: the same text as stdout prints for it.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("pkprof top - ").count(), 2);
    assert!(frames
        .iter()
        .all(|f| f.matches("pkprof top - ").count() == 1));
}

/// As the nobody user when we are root (so a check that only happened after loading BPF would
/// fail with "permission denied" instead), as ourselves otherwise.
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
    ])
    .arg(bin);
    c
}

/// A copy of pkprof that the nobody user can execute (the build tree may not be reachable).
fn public_pkprof(dir: &TempDir) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.0.join("pkprof");
    std::fs::copy(pkprof_bin(), &bin).unwrap();
    for p in [&dir.0, &bin] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

#[test]
fn non_loopback_listen_needs_allow_remote() {
    let dir = TempDir::new("listen");
    let bin = public_pkprof(&dir);
    let port = free_port();
    let started = Instant::now();
    let out = run_with_timeout(
        unprivileged(&bin).args([
            "top",
            "--batch",
            "-n",
            "1",
            "--listen",
            &format!("0.0.0.0:{port}"),
        ]),
        Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must refuse: {out:?}");
    assert_eq!(stderr.lines().count(), 1, "one line on stderr: {stderr:?}");
    assert!(
        stderr.starts_with("pkprof: ")
            && stderr.contains("--allow-remote")
            && stderr.contains("0.0.0.0"),
        "{stderr}"
    );
    // Refused before loading anything: even unprivileged it is this error, not "permission denied".
    assert!(!stderr.contains("permission denied"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.stdout.is_empty());
    // Nothing was bound.
    TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))).expect("the port is still free");
}
