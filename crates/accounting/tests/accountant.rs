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
        kthread: false,
        exited,
        target: false,
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

/// Every nanosecond in exactly one bucket, across a filter, a kernel thread, work items run for a
/// process, attributed receive work, and exits (a process's share must not count twice).
#[test]
fn buckets_add_up_to_wall_time_through_exits() {
    let filter = Filter {
        pids: vec![10],
        ..Filter::default()
    };
    let mut a = Accountant::new(false, filter, 0);
    // CPU 0 over 1 s: 600 ms task, 300 ms idle, 100 ms NET_RX softirq, of which 80 ms was
    // credited to thread 10 and 20 ms served no one.
    let mut cpu = CpuCounters {
        cpu: 0,
        idle_ns: 300 * MS,
        task_ns: 600 * MS,
        kernel_irq_ns: 20 * MS,
        ..CpuCounters::default()
    };
    cpu.softirq_ns[3] = 100 * MS;
    let mut served = thread(10, 10, "srv", 200, 100, false); // billed 100 ms NET_RX
    served.counters.served_ns[0] = 80 * MS;
    let mut kworker = thread(30, 30, "kworker/0:1", 150, 0, false);
    kworker.kthread = true;
    kworker.counters.served_out_ns = 50 * MS; // an item queued by thread 10
    served.counters.served_ns[2] = 50 * MS;
    let other = thread(20, 20, "batch", 250, 0, false);
    let check = |f: &pkprof_accounting::Interval| {
        let b = &f.buckets;
        assert_eq!(b.wall_ns, 1000 * MS);
        assert_eq!(
            b.idle_ns + b.processes_ns + b.other_ns + b.kernel_ns + b.in_flight_ns,
            b.wall_ns,
            "{b:?}"
        );
    };
    let s1 = Snapshot {
        mono_ns: 1000 * MS,
        threads: vec![served.clone(), kworker.clone(), other.clone()],
        cpus: vec![cpu],
        ..Snapshot::default()
    };
    let f = a.update(&s1, SelfUsage::default());
    check(&f);
    assert_eq!(
        f.buckets.processes_ns,
        (200 + 80 + 50) * MS,
        "own 200 + NET 80 + WORKQ 50"
    );
    assert_eq!(f.buckets.other_ns, 250 * MS);
    assert_eq!(
        f.buckets.kernel_ns,
        (100 + 20) * MS,
        "kworker's own 100 + unattributed irq 20"
    );
    // The served process exits: same totals, now from the exited sums; then it is gone.
    let mut gone = served.clone();
    gone.exited = true;
    let f = a.update(
        &Snapshot {
            mono_ns: 1000 * MS,
            threads: vec![gone, kworker.clone(), other.clone()],
            cpus: vec![cpu],
            ..Snapshot::default()
        },
        SelfUsage::default(),
    );
    check(&f);
    let f = a.update(
        &Snapshot {
            mono_ns: 1000 * MS,
            threads: vec![kworker, other],
            cpus: vec![cpu],
            ..Snapshot::default()
        },
        SelfUsage::default(),
    );
    check(&f);
}

/// The kernel side moves the difference between its slice and the scheduler's between task and
/// idle time when a slice ends, so a CPU's idle (or task) time can read lower than the read
/// before. Frames carry cumulative counters (exported to Prometheus as such): they never drop.
#[test]
fn cpu_totals_never_drop_when_a_slice_is_corrected() {
    let cpu = |idle_ms: u64, task_ms: u64| CpuCounters {
        cpu: 0,
        idle_ns: idle_ms * MS,
        task_ns: task_ms * MS,
        ..CpuCounters::default()
    };
    let mut a = Accountant::new(false, Filter::default(), 0);
    let mut totals = Vec::new();
    // Idle estimated up to the read, then 0.2 ms of it handed to the task that ran; later the
    // other way round.
    for (at, idle, task) in [(1000, 600, 400), (2000, 1100, 900), (3000, 1500, 1500)] {
        let mut s = snap(at, vec![]);
        s.cpus = vec![cpu(idle, task)];
        totals.push(a.update(&s, SelfUsage::default()).cpus[0].total);
    }
    let mut s = snap(3001, vec![]);
    s.cpus = vec![CpuCounters {
        idle_ns: 1500 * MS - 200_000,
        task_ns: 1501 * MS + 200_000,
        ..cpu(0, 0)
    }];
    totals.push(a.update(&s, SelfUsage::default()).cpus[0].total);
    for w in totals.windows(2) {
        assert!(
            w[1].idle_ns >= w[0].idle_ns && w[1].task_ns >= w[0].task_ns,
            "went back: {:?} -> {:?}",
            w[0],
            w[1]
        );
    }
    // And it catches up: once the reads pass the last figure shown, they are shown as read.
    let mut s = snap(4000, vec![]);
    s.cpus = vec![cpu(1800, 2200)];
    let f = a.update(&s, SelfUsage::default());
    assert_eq!(f.cpus[0].total, cpu(1800, 2200));
}

/// Time of threads that found the thread table full is in no row: a user thread's goes to OTHER
/// (and is shown as untracked), a kernel thread's to KERNEL; the buckets still add up.
#[test]
fn untracked_time_goes_to_other_and_kernel_not_nowhere() {
    let mut a = Accountant::new(false, Filter::default(), 0);
    let cpu = CpuCounters {
        cpu: 0,
        idle_ns: 100 * MS,
        task_ns: 900 * MS,
        untracked_ns: 500 * MS,
        untracked_kernel_ns: 100 * MS,
        ..CpuCounters::default()
    };
    let s = Snapshot {
        mono_ns: 1000 * MS,
        threads: vec![thread(10, 10, "app", 300, 0, false)],
        cpus: vec![cpu],
        ..Snapshot::default()
    };
    let b = a.update(&s, SelfUsage::default()).buckets;
    assert_eq!(b.processes_ns, 300 * MS);
    assert_eq!(b.other_ns, 500 * MS);
    assert_eq!(b.untracked_ns, 500 * MS);
    assert_eq!(b.kernel_ns, 100 * MS);
    assert_eq!(
        b.idle_ns + b.processes_ns + b.other_ns + b.kernel_ns + b.in_flight_ns,
        b.wall_ns
    );
}

/// A thread that ran unreported on CPU 0 (its time there missed) is billed it at its next
/// reported switch-out on CPU 1 (recovered there): the missed time left is the sums' difference
/// over CPUs, not per CPU, and the buckets still add up.
#[test]
fn recovered_time_leaves_other_across_cpus() {
    let mut a = Accountant::new(false, Filter::default(), 0);
    let cpus = vec![
        CpuCounters {
            cpu: 0,
            idle_ns: 200 * MS,
            task_ns: 800 * MS,
            missed_ns: 300 * MS,
            ..CpuCounters::default()
        },
        CpuCounters {
            cpu: 1,
            idle_ns: 500 * MS,
            task_ns: 500 * MS,
            recovered_ns: 250 * MS,
            ..CpuCounters::default()
        },
    ];
    // The thread: 500 ms on CPU 0, 250 of CPU 0's missed 300 (recovered on CPU 1), 500 on CPU 1.
    let s = Snapshot {
        mono_ns: 1000 * MS,
        threads: vec![thread(10, 10, "app", 1250, 0, false)],
        cpus,
        ..Snapshot::default()
    };
    let b = a.update(&s, SelfUsage::default()).buckets;
    assert_eq!(b.processes_ns, 1250 * MS);
    assert_eq!(b.unreported_ns, 50 * MS);
    assert_eq!(b.other_ns, 50 * MS);
    assert_eq!(
        b.idle_ns + b.processes_ns + b.other_ns + b.kernel_ns + b.in_flight_ns,
        b.wall_ns
    );
}

/// The interactive view's `H` switches rows between processes and threads mid-run: the since-start
/// buckets still hold every nanosecond once, whichever way and however often it switches, also
/// for a thread that exited while its process runs on (counted in the process row, then in the
/// exited sums once rows are threads).
#[test]
fn buckets_add_up_when_switching_between_process_and_thread_rows() {
    let filter = Filter {
        pids: vec![10],
        ..Filter::default()
    };
    let mut a = Accountant::new(false, filter, 0);
    let cpu = CpuCounters {
        cpu: 0,
        idle_ns: 100 * MS,
        task_ns: 900 * MS,
        ..CpuCounters::default()
    };
    let frame = |a: &mut Accountant, threads: Vec<ThreadSample>| {
        let f = a.update(
            &Snapshot {
                mono_ns: 1000 * MS,
                threads,
                cpus: vec![cpu],
                ..Snapshot::default()
            },
            SelfUsage::default(),
        );
        let b = &f.buckets;
        assert_eq!(b.wall_ns, 1000 * MS);
        assert_eq!(
            b.idle_ns + b.processes_ns + b.other_ns + b.kernel_ns + b.in_flight_ns,
            b.wall_ns,
            "{b:?} (per_thread {})",
            f.per_thread
        );
        assert_eq!(b.processes_ns, 600 * MS, "process 10's three threads");
        assert_eq!(b.other_ns, 300 * MS, "process 20");
        f
    };
    let main = thread(10, 10, "srv", 200, 0, false);
    let worker = thread(11, 10, "srv", 300, 0, false);
    let helper = thread(12, 10, "srv", 100, 0, false);
    let other = thread(20, 20, "batch", 300, 0, false);
    let mut helper_gone = helper.clone();
    helper_gone.exited = true;
    frame(
        &mut a,
        vec![main.clone(), worker.clone(), helper.clone(), other.clone()],
    );
    // The helper thread exits while the process runs on; its time stays in the process row.
    let f = frame(
        &mut a,
        vec![main.clone(), worker.clone(), helper_gone, other.clone()],
    );
    assert_eq!(f.rows.iter().find(|r| r.pid == 10).unwrap().threads, 3);
    frame(&mut a, vec![main.clone(), worker.clone(), other.clone()]);
    a.set_per_thread(true);
    let f = frame(&mut a, vec![main.clone(), worker.clone(), other.clone()]);
    assert!(f.per_thread && f.rows.iter().all(|r| r.tid.is_some()));
    a.set_per_thread(false);
    let f = frame(&mut a, vec![main.clone(), worker.clone(), other.clone()]);
    assert!(!f.per_thread);
    a.set_per_thread(true);
    frame(&mut a, vec![main, worker, other]);
}
