//! The accountant on synthetic snapshots: exact expected numbers, no kernel needed.

use pkprof_accounting::{
    Accountant, Counters, CpuCounters, Filter, SelfUsage, Snapshot, ThreadSample,
};

const MS: u64 = 1_000_000;

fn thread(
    tid: u32,
    pid: u32,
    comm: &str,
    task_ms: u64,
    net_rx_ms: u64,
    exited: bool,
) -> ThreadSample {
    let mut c = Counters {
        task_ns: task_ms * MS,
        ..Counters::default()
    };
    c.softirq_ns[3] = net_rx_ms * MS;
    ThreadSample {
        tid,
        pid,
        ppid: 1,
        cgroup_id: 7,
        comm: comm.into(),
        counters: c,
        exited,
    }
}

fn snap(at_ms: u64, threads: Vec<ThreadSample>) -> Snapshot {
    Snapshot {
        mono_ns: at_ms * MS,
        threads,
        ..Snapshot::default()
    }
}

#[test]
fn process_rows_sum_threads_and_compute_interval_shares() {
    let mut a = Accountant::new(false, Filter::default(), 0);
    let f = a.update(
        &snap(
            1000,
            vec![
                thread(10, 10, "srv", 300, 0, false),
                thread(11, 10, "srv", 200, 100, false),
            ],
        ),
        SelfUsage::default(),
    );
    assert_eq!(f.rows.len(), 1);
    let r = &f.rows[0];
    assert_eq!((r.pid, r.threads), (10, 2));
    assert_eq!(r.total.on_cpu_ns(), 600 * MS);
    assert!((r.cpu_pct - 60.0).abs() < 1e-9, "{}", r.cpu_pct);
    assert!((r.irq_billed_pct - 10.0).abs() < 1e-9);
    assert_eq!(
        r.user_pct, None,
        "user/sys is not guessed without syscall mode"
    );

    // Next second: thread 11 ran 100 ms more.
    let f = a.update(
        &snap(
            2000,
            vec![
                thread(10, 10, "srv", 300, 0, false),
                thread(11, 10, "srv", 300, 100, false),
            ],
        ),
        SelfUsage::default(),
    );
    assert!((f.rows[0].cpu_pct - 10.0).abs() < 1e-9);
    assert_eq!(f.rows[0].total.on_cpu_ns(), 700 * MS);
}

#[test]
fn exited_threads_keep_counting_in_their_process_total() {
    let mut a = Accountant::new(false, Filter::default(), 0);
    a.update(
        &snap(
            1000,
            vec![
                thread(20, 20, "app", 100, 0, false),
                thread(21, 20, "app", 50, 0, false),
            ],
        ),
        SelfUsage::default(),
    );
    // Thread 21 exits with 80 ms in total.
    let f = a.update(
        &snap(
            2000,
            vec![
                thread(20, 20, "app", 100, 0, false),
                thread(21, 20, "app", 80, 0, true),
            ],
        ),
        SelfUsage::default(),
    );
    assert_eq!(f.rows[0].total.on_cpu_ns(), 180 * MS);
    assert!(!f.rows[0].exited);
    // It is gone from the kernel's table; its time stays in the process.
    let f = a.update(
        &snap(3000, vec![thread(20, 20, "app", 120, 0, false)]),
        SelfUsage::default(),
    );
    assert_eq!(f.rows[0].total.on_cpu_ns(), 200 * MS);
    assert_eq!(f.rows[0].threads, 2);
    // The process exits: its last row says so, then it disappears.
    let f = a.update(
        &snap(4000, vec![thread(20, 20, "app", 130, 0, true)]),
        SelfUsage::default(),
    );
    assert!(f.rows[0].exited);
    assert_eq!(f.rows[0].total.on_cpu_ns(), 210 * MS);
    let f = a.update(&snap(5000, vec![]), SelfUsage::default());
    assert!(f.rows.is_empty());
}

#[test]
fn a_racing_read_never_makes_counters_run_backwards() {
    let mut a = Accountant::new(true, Filter::default(), 0);
    a.update(
        &snap(1000, vec![thread(30, 30, "x", 500, 0, false)]),
        SelfUsage::default(),
    );
    let f = a.update(
        &snap(2000, vec![thread(30, 30, "x", 450, 0, false)]),
        SelfUsage::default(),
    );
    assert_eq!(f.rows[0].total.task_ns, 500 * MS);
    assert_eq!(f.rows[0].delta.task_ns, 0);
}

#[test]
fn per_thread_rows_and_filters() {
    let comm = regex::Regex::new("^web").unwrap();
    let mut a = Accountant::new(
        true,
        Filter {
            comm: Some(comm),
            ..Filter::default()
        },
        0,
    );
    let f = a.update(
        &snap(
            1000,
            vec![
                thread(40, 40, "web", 10, 0, false),
                thread(41, 40, "web", 30, 0, false),
                thread(50, 50, "db", 90, 0, false),
            ],
        ),
        SelfUsage::default(),
    );
    let tids: Vec<_> = f.rows.iter().map(|r| r.tid).collect();
    assert_eq!(
        tids,
        vec![Some(41), Some(40)],
        "sorted by CPU, db filtered out"
    );

    let mut a = Accountant::new(
        false,
        Filter {
            pids: vec![50],
            ..Filter::default()
        },
        0,
    );
    let f = a.update(
        &snap(
            1000,
            vec![
                thread(40, 40, "web", 10, 0, false),
                thread(50, 50, "db", 90, 0, false),
            ],
        ),
        SelfUsage::default(),
    );
    assert_eq!(f.rows.len(), 1);
    assert_eq!(f.rows[0].pid, 50);
}

#[test]
fn cpu_rows_split_the_interval_exactly() {
    let mut a = Accountant::new(false, Filter::default(), 0);
    let mut c = CpuCounters {
        cpu: 1,
        idle_ns: 400 * MS,
        task_ns: 500 * MS,
        hardirq_ns: 20 * MS,
        ..CpuCounters::default()
    };
    c.softirq_ns[3] = 80 * MS;
    let s = Snapshot {
        mono_ns: 1000 * MS,
        cpus: vec![c],
        ..Snapshot::default()
    };
    let f = a.update(&s, SelfUsage::default());
    let r = &f.cpus[0];
    assert!((r.busy_pct - 50.0).abs() < 1e-9);
    assert!((r.idle_pct - 40.0).abs() < 1e-9);
    assert!((r.irq_pct - 2.0).abs() < 1e-9);
    assert!((r.softirq_pct_by_vec[3] - 8.0).abs() < 1e-9);
    assert!((r.busy_pct + r.idle_pct + r.irq_pct + r.softirq_pct - 100.0).abs() < 1e-9);
}
