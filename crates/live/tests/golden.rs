//! Golden-file tests of the live renderers (text frame, JSON line, Prometheus exposition), on
//! synthetic frames built here, so no root or kernel is involved.
//!
//! Each output is compared line by line with `tests/golden/NAME`; a mismatch prints a diff.
//! `PKPROF_BLESS=1 cargo test -p pkprof-live --test golden` rewrites the files on purpose; without
//! it a missing golden file is a failure, never created silently.
//! JSON is stored re-indented (one token per line, scalar arrays kept on one line) so a diff is
//! readable; the re-indentation only adds whitespace outside strings and is checked to be lossless.
//! The exposition is also checked with `promtool check metrics` (Debian package `prometheus`).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use pkprof_accounting::{
    Buckets, Counters, CpuCounters, CpuRow, Interval, LostCounters, OtherFn, ProgStat, Row,
    RunqHist, SelfUsage, SyscallRow, TagStats, WallCounters, CHAIN_NAMES, NR_CHAINS, NR_SOFTIRQS,
};
use pkprof_live::prometheus::Exposition;
use pkprof_live::{json, text};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
// Softirq vector numbers (as in SOFTIRQ_NAMES).
const TIMER: usize = 1;
const NET_RX: usize = 3;
const SCHED: usize = 7;
const RCU: usize = 9;

/// Per-chain values at the named chains' slots (CHAIN_NAMES), 0 at the others.
fn by_chain(v: &[(&str, u64)]) -> [u64; NR_CHAINS] {
    let mut a = [0; NR_CHAINS];
    for (name, x) in v {
        a[CHAIN_NAMES
            .iter()
            .position(|n| n == name)
            .expect("a chain name")] = *x;
    }
    a
}

fn softirqs(v: &[(usize, u64)]) -> [u64; NR_SOFTIRQS] {
    let mut a = [0; NR_SOFTIRQS];
    for (i, ns) in v {
        a[*i] = *ns;
    }
    a
}

/// Cumulative counters; with `split` the task time is divided into user/sys/unsplit (60/30/10).
fn counters(task_ns: u64, hardirq_ns: u64, soft: &[(usize, u64)], split: bool) -> Counters {
    let (user_ns, sys_ns) = if split {
        (task_ns / 10 * 6, task_ns / 10 * 3)
    } else {
        (0, 0)
    };
    Counters {
        task_ns,
        hardirq_ns,
        softirq_ns: softirqs(soft),
        user_ns,
        sys_ns,
        unsplit_ns: if split { task_ns - user_ns - sys_ns } else { 0 },
        syscalls: task_ns / MS,
        faults: 17,
        switches: 40,
        ..Default::default()
    }
}

/// Wall-time classes of a row that ran `on_cpu` ns: a quarter of that waiting for a CPU, half
/// blocked on I/O, as much again asleep, and a few waits in the histogram.
fn wall(on_cpu: u64) -> WallCounters {
    let mut w = WallCounters {
        running_ns: on_cpu,
        runq_ns: on_cpu / 4,
        blocked_ns: [on_cpu / 2, 0, 0, 0, on_cpu, 0, 0],
        blocks: [3, 0, 0, 0, 5, 0, 0],
        preemptions: 2,
        runq_waits: 10,
        runq_max_ns: 150_000,
        ..Default::default()
    };
    w.wall_ns = w.classes_ns();
    w.runq_hist.0[RunqHist::bucket(20_000)] = 9;
    w.runq_hist.0[RunqHist::bucket(150_000)] = 1;
    w
}

/// `r` blocked 40 ms more as OTHER, in smpboot_thread_fn, over 12 periods.
fn with_other_fn(mut r: Row) -> Row {
    r.total.wall.blocked_ns[6] += 40 * MS;
    r.total.wall.blocks[6] += 12;
    r.total.wall.wall_ns += 40 * MS;
    r.other_fns = vec![OtherFn {
        function: "smpboot_thread_fn".into(),
        ns: 40 * MS,
        count: 12,
        ..Default::default()
    }];
    r
}

fn row(pid: u32, comm: &str, cpu_pct: f64, total: Counters, split: bool) -> Row {
    let total = Counters {
        wall: wall(total.on_cpu_ns()),
        ..total
    };
    let busy = cpu_pct > 0.0;
    Row {
        wait_pct: cpu_pct / 4.0,
        blocked_pct: cpu_pct * 1.5,
        runq_p50_ns: busy.then(|| total.wall.runq_hist.quantile(0.5, 150_000).unwrap()),
        runq_p99_ns: busy.then(|| total.wall.runq_hist.quantile(0.99, 150_000).unwrap()),
        runq_max_ns: 150_000,
        pid,
        tid: None,
        ppid: 1,
        comm: comm.to_string(),
        cgroup_id: 4242,
        threads: 1,
        exited: false,
        cpu_pct,
        user_pct: split.then_some(cpu_pct * 0.75),
        sys_pct: split.then_some(cpu_pct * 0.25),
        irq_billed_pct: if total.irq_billed_ns() > 0 { 0.5 } else { 0.0 },
        own_pct: cpu_pct - if total.irq_billed_ns() > 0 { 0.5 } else { 0.0 },
        net_pct: if total.served_ns[0] > 0 { 2.0 } else { 0.0 },
        server_pct: if total.served_ns[3] > 0 { 1.0 } else { 0.0 },
        cost_pct: cpu_pct - if total.irq_billed_ns() > 0 { 0.5 } else { 0.0 }
            + if total.served_ns[0] > 0 { 2.0 } else { 0.0 }
            + if total.served_ns[3] > 0 { 1.0 } else { 0.0 },
        billed_for_others_pct: if total.irq_billed_ns() > 0 { 0.5 } else { 0.0 },
        delta: Counters {
            task_ns: (cpu_pct * 1e7) as u64,
            ..Default::default()
        },
        total,
        ..Default::default()
    }
}

/// Two CPUs (one with softirq work on several vectors, one below the display threshold), five
/// processes: a busy one, one whose comm needs escaping, a kernel thread billed softirq work, one
/// that has just exited and one with over an hour of CPU. Lost counters are non-zero.
fn frame(split: bool) -> Interval {
    let cpu0 = CpuRow {
        cpu: 0,
        busy_pct: 62.5,
        idle_pct: 30.0,
        irq_pct: 2.5,
        softirq_pct: 5.0,
        // SCHED 0.04 is below the 0.05 shown in text frames.
        softirq_pct_by_vec: {
            let mut v = [0.0; NR_SOFTIRQS];
            v[TIMER] = 1.5;
            v[NET_RX] = 3.0;
            v[SCHED] = 0.04;
            v[RCU] = 0.46;
            v
        },
        total: CpuCounters {
            cpu: 0,
            idle_ns: 30 * S,
            task_ns: 62 * S + 500 * MS,
            hardirq_ns: 2 * S + 500 * MS,
            softirq_ns: softirqs(&[
                (TIMER, 1500 * MS),
                (NET_RX, 3 * S),
                (SCHED, 40 * MS),
                (RCU, 460 * MS),
            ]),
            ..Default::default()
        },
    };
    let cpu1 = CpuRow {
        cpu: 1,
        busy_pct: 100.0,
        total: CpuCounters {
            cpu: 1,
            task_ns: 100 * S,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut exited = row(5150, "short", 3.0, counters(750 * MS, 0, &[], split), split);
    exited.exited = true;
    let mut multi = row(
        1001,
        "sh\"q\\x",
        12.25,
        counters(20 * S, 0, &[(TIMER, 5 * MS)], split),
        split,
    );
    multi.threads = 4;
    let rows = vec![
        row(
            4242,
            "busy",
            99.0,
            Counters {
                // 1.5 s of receive work done for it elsewhere (NET), 200 ms of work items (WORKQ),
                // 300 ms of a server's work for its 120 requests (SERVER).
                served_ns: by_chain(&[
                    ("net", 1500 * MS),
                    ("workq", 200 * MS),
                    ("server", 300 * MS),
                ]),
                served_items: by_chain(&[("net", 3000), ("workq", 40), ("server", 120)]),
                ..counters(125 * S + 500 * MS, 2 * MS, &[(NET_RX, 8 * MS)], split)
            },
            split,
        ),
        multi,
        // Blocked 40 ms as OTHER in its kernel loop, 12 times (OTHER's kernel functions).
        with_other_fn(Row {
            kthread: true,
            ..row(
                77,
                "ksoftirqd/0",
                5.0,
                Counters {
                    served_out_ns: 200 * MS, // the work items it ran for busy
                    ..counters(S, 0, &[(NET_RX, 3 * S), (RCU, 10 * MS)], split)
                },
                split,
            )
        }),
        exited,
        row(
            1,
            "systemd",
            0.0,
            counters(3600 * S + 250 * MS, 0, &[], split),
            split,
        ),
    ];
    let syscalls = if split {
        vec![
            SyscallRow {
                pid: 4242,
                nr: 0,
                name: "read".into(),
                count: 1200,
                total_ns: 35 * MS,
                errors: 0,
            },
            SyscallRow {
                pid: 1001,
                nr: 257,
                name: "openat".into(),
                count: 9,
                total_ns: 120_000,
                errors: 2,
            },
        ]
    } else {
        Vec::new()
    };
    Interval {
        unix_s: 1_700_000_000.5,
        interval_s: 1.0,
        per_thread: false,
        split_modes: split,
        cpus: vec![cpu0, cpu1],
        rows,
        syscalls,
        lost: LostCounters {
            thread_map_full: 3,
            ctx_reset: 1,
            bpf_recursion_misses: 7,
            ..Default::default()
        },
        buckets: Buckets {
            wall_ns: 200 * S,
            idle_ns: 60 * S,
            processes_ns: 120 * S,
            other_ns: 5 * S,
            kernel_ns: 14 * S + 990 * MS,
            in_flight_ns: 10 * MS,
            unreported_ns: 0,
            untracked_ns: 2 * S, // of other_ns: the 3 threads the full table lost
        },
        tags: TagStats {
            expired_ns: 3 * MS,
            expired: 2,
            map_full: 0,
        },
        progs: vec![
            ProgStat {
                name: "handle_sched_switch".into(),
                run_ns: 123_456_789,
                run_cnt: 1000,
                recursion_misses: 7,
            },
            ProgStat {
                name: "handle_softirq_entry".into(),
                run_ns: 0,
                run_cnt: 0,
                recursion_misses: 0,
            },
        ],
        self_usage: SelfUsage {
            cpu_pct: 0.8,
            rss_bytes: 12 * 1024 * 1024 + 4096,
        },
    }
}

/// The frame with per-thread rows (TID column): two threads of one process.
fn thread_frame() -> Interval {
    let mut f = frame(false);
    f.per_thread = true;
    f.rows.truncate(2);
    f.rows[1].pid = 4242;
    for (r, tid) in f.rows.iter_mut().zip([4242, 4250]) {
        r.tid = Some(tid);
        r.threads = 1;
    }
    f
}

// ---------------------------------------------------------------------------------------------
// Golden-file machinery

/// Compares `actual` with `tests/golden/NAME` ([`pkprof_golden::assert_golden`]).
#[track_caller]
fn check_golden(name: &str, actual: &str) {
    pkprof_golden::assert_golden(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name),
        actual,
    );
}

/// Compact JSON re-indented: a newline after `{`, `,` and before `}` outside strings; arrays that
/// hold only scalars stay on one line. Removing the added whitespace gives back the input.
fn indent_json(compact: &str) -> String {
    let bytes: Vec<char> = compact.chars().collect();
    let (mut out, mut depth, mut in_str, mut esc, mut flat) =
        (String::new(), 0usize, false, false, 0usize);
    let nl = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    for (k, &c) in bytes.iter().enumerate() {
        if in_str {
            out.push(c);
            (esc, in_str) = (!esc && c == '\\', esc || c != '"');
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push(c);
            }
            '[' if flat > 0
                || !bytes[k + 1..]
                    .iter()
                    .take_while(|&&d| d != ']')
                    .any(|&d| d == '{' || d == '[') =>
            {
                flat += 1;
                out.push(c);
            }
            ']' if flat > 0 => {
                flat -= 1;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                depth += 1;
                if !matches!(bytes.get(k + 1), Some('}' | ']')) {
                    nl(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth -= 1;
                if !matches!(bytes.get(k - 1), Some('{' | '[')) {
                    nl(&mut out, depth);
                }
                out.push(c);
            }
            ',' if flat == 0 => {
                out.push(c);
                nl(&mut out, depth);
            }
            _ => out.push(c),
        }
    }
    out.push('\n');
    out
}

/// Removes the whitespace `indent_json` adds (outside strings).
fn unindent_json(s: &str) -> String {
    let (mut out, mut in_str, mut esc) = (String::new(), false, false);
    for c in s.chars() {
        if in_str {
            (esc, in_str) = (!esc && c == '\\', esc || c != '"');
        } else if c == '"' {
            in_str = true;
        } else if c == ' ' || c == '\n' {
            continue;
        }
        out.push(c);
    }
    out
}

/// `promtool check metrics` on the exposition: parse errors and lint problems fail. Skipped (with a
/// note) only where promtool is not installed.
fn promtool_check(name: &str, exposition: &str) {
    use std::io::Write;
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("promtool not available ({e}): skipping the parser check of {name}");
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics rejects {name} ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The value of the one sample line starting with `series ` (e.g. `pkprof_x{a="b"}`).
fn sample(exposition: &str, series: &str) -> f64 {
    let hits: Vec<&str> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "exactly one sample {series} in:\n{exposition}"
    );
    hits[0].parse().unwrap()
}

fn series(pid: &str, comm: &str, kind: &str) -> String {
    format!("pkprof_cpu_seconds_total{{pid=\"{pid}\",comm=\"{comm}\",kind=\"{kind}\"}}")
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn text_frame() {
    check_golden("text_split_off.txt", &text::render(&frame(false), None));
    check_golden(
        "text_split_on_3_rows.txt",
        &text::render(&frame(true), Some(3)),
    );
    check_golden("text_threads.txt", &text::render(&thread_frame(), None));
}

#[test]
fn text_frame_without_lost_events_has_no_lost_line() {
    let mut f = frame(false);
    f.lost = LostCounters::default();
    let t = text::render(&f, None);
    assert!(!t.contains("LOST"), "{t}");
    assert!(text::render(&frame(false), None)
        .contains("LOST events: thread_map_full=3 ctx_reset=1 bpf_recursion_misses=7\n"));
}

#[test]
fn json_line() {
    for (name, f) in [
        ("json_split_off.json", frame(false)),
        ("json_split_on.json", frame(true)),
    ] {
        let line = json::render(&f);
        assert!(!line.contains('\n'), "one line per frame");
        let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(v["rows"].as_array().unwrap().len(), f.rows.len());
        assert_eq!(v["rows"][3]["exited"], true);
        assert_eq!(v["split_modes"], f.split_modes);
        // Absent measurements are null, never guessed.
        assert_eq!(v["rows"][0]["user_pct"].is_null(), !f.split_modes);
        let indented = indent_json(&line);
        assert_eq!(unindent_json(&indented), line, "re-indentation is lossless");
        check_golden(name, &indented);
    }
}

#[test]
fn prometheus_all_processes() {
    let mut e = Exposition::new(20);
    assert!(
        e.text().starts_with('#'),
        "before the first frame only a comment"
    );
    e.update(&frame(false));
    check_golden("prom_split_off.txt", e.text());
    promtool_check("prom_split_off.txt", e.text());
    // Everything fits in the top 20: `other` holds nothing yet.
    assert_eq!(sample(e.text(), &series("other", "other", "own")), 0.0);
    assert_eq!(sample(e.text(), &series("4242", "busy", "own")), 125.5);
    // Label values escaped: sh"q\x.
    assert_eq!(
        sample(e.text(), &series("1001", r#"sh\"q\\x"#, "softirq")),
        0.005
    );
}

#[test]
fn prometheus_top_n_sums_the_rest_into_other() {
    let mut e = Exposition::new(2);
    e.update(&frame(true));
    let t = e.text().to_string();
    check_golden("prom_split_on_top2.txt", &t);
    promtool_check("prom_split_on_top2.txt", &t);
    // The 2 slots go to the busiest rows of the interval: busy and the escaped-name shell; idle
    // systemd (3600.25 s in total), ksoftirqd and the exited process are summed into `other`.
    let individual: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("pkprof_cpu_seconds_total{") && l.contains("kind=\"hardirq\""))
        .collect();
    assert_eq!(individual.len(), 3, "2 processes + other:\n{t}");
    assert!(
        t.contains(&series("4242", "busy", "sys"))
            && t.contains("pid=\"1001\"")
            && !t.contains("pid=\"1\""),
        "{t}"
    );
    // ksoftirqd's 0.2 s of work items run for busy are served_out, not its sys time.
    let others = 3600.25 + (1.0 - 0.2) + 0.75;
    let split_sum: f64 = ["user", "sys", "unsplit"]
        .iter()
        .map(|k| sample(&t, &series("other", "other", k)))
        .sum();
    assert!(
        (split_sum - others).abs() < 1e-9,
        "other user+sys+unsplit = {split_sum}, want {others}"
    );
    assert!((sample(&t, &series("other", "other", "softirq")) - 3.010).abs() < 1e-9);
    assert!(
        !t.contains("kind=\"own\""),
        "no task kind when user/sys is measured"
    );
}

#[test]
fn prometheus_exited_process_moves_into_other() {
    let mut e = Exposition::new(10);
    let first = frame(false);
    e.update(&first);
    check_golden("prom_exit_1.txt", e.text());
    assert_eq!(sample(e.text(), &series("5150", "short", "own")), 0.75);
    assert_eq!(sample(e.text(), &series("other", "other", "own")), 0.0);

    // Next refresh: the exited process is gone, the others ran 1 s more each (busy also got 1 ms
    // more NET_RX billed); its 0.75 s stays in `other` for good, so the counters never drop.
    let mut second = first.clone();
    second.rows.retain(|r| !r.exited);
    for r in &mut second.rows {
        r.total.task_ns += S;
    }
    second.rows[0].total.softirq_ns[NET_RX] += MS;
    e.update(&second);
    let t = e.text().to_string();
    check_golden("prom_exit_2.txt", &t);
    promtool_check("prom_exit_2.txt", &t);
    assert!(!t.contains("pid=\"5150\""), "{t}");
    assert_eq!(sample(&t, &series("other", "other", "own")), 0.75);
    assert_eq!(sample(&t, &series("4242", "busy", "own")), 126.5);
    assert_eq!(sample(&t, &series("4242", "busy", "softirq")), 0.009);

    // And it is counted once only: a third identical frame leaves `other` as it was.
    e.update(&second);
    assert_eq!(sample(e.text(), &series("other", "other", "own")), 0.75);
}
