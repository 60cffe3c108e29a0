//! The accountant: successive snapshots in, intervals out.
//!
//! It keeps the previous cumulative counters of every live thread (for interval deltas) and the
//! totals of threads that have exited (so a process's total survives its threads), and folds
//! threads into processes unless per-thread rows are asked for.

use std::collections::HashMap;

use crate::counters::{Counters, CpuCounters, NR_SOFTIRQS};
use crate::filter::Filter;
use crate::interval::{Buckets, CpuRow, Interval, Row, SelfUsage, SyscallRow, TagStats};
use crate::other_fns::OtherFnTable;
use crate::snapshot::{Snapshot, ThreadSample};

/// Most syscall rows an interval carries (highest counts first).
const MAX_SYSCALL_ROWS: usize = 64;

/// Threads of a live process that exited (process rows only), with what the filter needs to
/// bucket them if the view switches to per-thread rows.
#[derive(Default)]
struct DeadThreads {
    total: Counters,
    threads: u32,
    comm: String,
    cgroup_id: u64,
    kthread: bool,
}

pub struct Accountant {
    per_thread: bool,
    filter: Filter,
    prev_mono_ns: u64,
    prev_threads: HashMap<u32, Counters>,
    /// `process_rows`'s buffers, kept between reads: each process's row, each thread's row.
    by_pid: HashMap<u32, usize>,
    row_of_thread: Vec<usize>,
    prev_cpus: HashMap<u32, CpuCounters>,
    dead: HashMap<u32, DeadThreads>,
    /// Bucket sums of rows that have exited (their totals no longer come from the kernel).
    exited: Buckets,
    /// OTHER's kernel functions of exited threads (their own table).
    other_fns: OtherFnTable,
}

impl Accountant {
    /// `attach_mono_ns` is when counting started (CLOCK_MONOTONIC): the first interval covers the
    /// time since then.
    pub fn new(per_thread: bool, filter: Filter, attach_mono_ns: u64) -> Self {
        Accountant {
            per_thread,
            filter,
            prev_mono_ns: attach_mono_ns,
            prev_threads: HashMap::new(),
            by_pid: HashMap::new(),
            row_of_thread: Vec::new(),
            prev_cpus: HashMap::new(),
            dead: HashMap::new(),
            exited: Buckets::default(),
            other_fns: OtherFnTable::default(),
        }
    }

    /// Switches between per-thread and per-process rows from the next interval on (the interactive
    /// view's `H`). Threads that exited in a process still running are counted in its row; thread
    /// rows no longer show them, so their time moves into the exited sums, keeping every
    /// nanosecond in one bucket.
    pub fn set_per_thread(&mut self, per_thread: bool) {
        if per_thread && !self.per_thread {
            for (pid, d) in self.dead.drain() {
                let row = Row {
                    pid,
                    comm: d.comm,
                    cgroup_id: d.cgroup_id,
                    kthread: d.kthread,
                    total: d.total,
                    ..Row::default()
                };
                bucket_row(&mut self.exited, &row, &self.filter);
            }
        }
        self.per_thread = per_thread;
    }

    pub fn per_thread(&self) -> bool {
        self.per_thread
    }

    /// Turns the next snapshot into an interval.
    pub fn update(&mut self, snap: &Snapshot, self_usage: SelfUsage) -> Interval {
        let interval_ns = snap.mono_ns.saturating_sub(self.prev_mono_ns).max(1);
        self.prev_mono_ns = snap.mono_ns;
        let pct = |ns: u64| ns as f64 * 100.0 / interval_ns as f64;

        let mut rows = if self.per_thread {
            (snap.threads.iter())
                .map(|t| {
                    let mut row = thread_row(t);
                    advance(&mut self.prev_threads, t, |total, delta| {
                        row.total = *total;
                        row.delta = *delta;
                    });
                    row
                })
                .collect()
        } else {
            self.process_rows(&snap.threads)
        };
        let refs: Vec<&ThreadSample> = snap.threads.iter().collect();
        let mut fns = self.other_fns.rows(&snap.other_fns, &refs, self.per_thread);
        if !fns.is_empty() {
            for r in &mut rows {
                r.other_fns = fns.remove(&r.tid.unwrap_or(r.pid)).unwrap_or_default();
            }
        }
        let buckets = self.buckets(snap, &rows);
        rows.retain(|r| self.filter.keeps(r.pid, r.tid, &r.comm, r.cgroup_id));
        for r in &mut rows {
            let d = &r.delta;
            r.cpu_pct = pct(d.on_cpu_ns());
            r.irq_billed_pct = pct(d.irq_billed_ns());
            r.own_pct = pct(d.own_ns());
            r.net_pct = pct(d.served_ns[0]);
            r.block_pct = pct(d.served_ns[1]);
            r.workq_pct = pct(d.served_ns[2]);
            r.server_pct = pct(d.served_ns[3]);
            r.cost_pct = pct(d.cost_ns());
            r.billed_for_others_pct = pct(d.billed_for_others_ns());
            r.wait_pct = pct(d.wall.runq_ns);
            r.blocked_pct = pct(d.wall.blocked_total_ns());
            r.runq_max_ns = r.total.wall.runq_max_ns;
            r.runq_p50_ns = d.wall.runq_hist.quantile(0.5, r.runq_max_ns);
            r.runq_p99_ns = d.wall.runq_hist.quantile(0.99, r.runq_max_ns);
            if snap.split_modes {
                r.user_pct = Some(pct(r.delta.user_ns));
                r.sys_pct = Some(pct(r.delta.sys_ns));
            }
        }
        // Keys sorted, then each row moved once: a row is large (two `Counters`, each with its
        // run-queue histogram), and a comparison sort moved them O(n log n) times.
        rows.sort_by_cached_key(|r| {
            (
                std::cmp::Reverse(r.delta.cost_ns()),
                std::cmp::Reverse(r.delta.on_cpu_ns()),
                std::cmp::Reverse(r.total.cost_ns()),
                r.pid,
                r.tid,
            )
        });

        Interval {
            unix_s: snap.unix_s,
            interval_s: interval_ns as f64 / 1e9,
            per_thread: self.per_thread,
            split_modes: snap.split_modes,
            cpus: self.cpu_rows(snap),
            syscalls: self.syscall_rows(snap, &rows),
            rows,
            lost: snap.lost,
            tags: TagStats {
                expired_ns: snap.swept_expired_ns
                    + snap.cpus.iter().map(|c| c.expired_ns).sum::<u64>(),
                expired: snap.swept_expired_tags
                    + snap.cpus.iter().map(|c| c.expired_tags).sum::<u64>(),
                map_full: snap.lost.tag_map_full,
            },
            buckets,
            progs: snap.progs.clone(),
            self_usage,
        }
    }

    /// Every nanosecond since attach in exactly one bucket. `rows` are all rows of this interval,
    /// before filtering; rows that exit here are folded into the running sums for later intervals.
    fn buckets(&mut self, snap: &Snapshot, rows: &[Row]) -> Buckets {
        let mut b = Buckets::default();
        for r in rows {
            bucket_row(&mut b, r, &self.filter);
        }
        // Rows that exited in earlier intervals; this interval's exits are in `rows` one last time.
        b.processes_ns += self.exited.processes_ns;
        b.other_ns += self.exited.other_ns;
        b.kernel_ns += self.exited.kernel_ns;
        for r in rows.iter().filter(|r| r.exited) {
            bucket_row(&mut self.exited, r, &self.filter);
        }
        let (mut missed, mut recovered) = (0u64, 0u64);
        for c in &snap.cpus {
            b.wall_ns += c.total_ns();
            b.idle_ns += c.idle_ns;
            b.kernel_ns += c.kernel_irq_ns + c.orphan_wq_ns + c.untracked_kernel_ns;
            b.in_flight_ns += c.in_flight_ns;
            b.other_ns += c.untracked_ns;
            b.untracked_ns += c.untracked_ns;
            missed += c.missed_ns;
            recovered += c.recovered_ns;
        }
        // Recovered time is billed to its thread on whichever CPU found it, so only the sums
        // over CPUs compare; one CPU's recovery can read before another's missed time.
        b.unreported_ns = missed.saturating_sub(recovered);
        b.other_ns += b.unreported_ns;
        b.kernel_ns += snap.swept_expired_ns;
        b.in_flight_ns += snap.sockets_pending_ns;
        b
    }

    /// One row per process: its threads summed (each thread's counters are added where they
    /// are, not copied around: the agent meets thousands of exited threads a read).
    fn process_rows(&mut self, threads: &[ThreadSample]) -> Vec<Row> {
        // First the rows, with what the threads say of their process; then the counters.
        // Sized for as many processes as the last read had, plus this read's threads beyond
        // its (new processes, under a fork loop, are about one a thread): rows are large, and
        // growing the vector moved them all, but a row a thread would reserve megabytes on a
        // machine of many threads per process (the frame keeps the spare capacity).
        let hint = (self.by_pid.len() + threads.len().saturating_sub(self.row_of_thread.len()))
            .min(threads.len());
        let mut rows: Vec<Row> = Vec::with_capacity(hint);
        let by_pid = &mut self.by_pid;
        by_pid.clear();
        let at = &mut self.row_of_thread;
        at.clear();
        for t in threads {
            let i = *by_pid.entry(t.pid).or_insert_with(|| {
                let mut row = Row {
                    pid: t.pid,
                    exited: true,
                    ..Row::default()
                };
                // Threads that exited in earlier intervals still count in the process's total.
                if let Some(d) = self.dead.get(&t.pid) {
                    row.total = d.total;
                    row.threads = d.threads;
                }
                rows.push(row);
                rows.len() - 1
            });
            at.push(i);
            let row = &mut rows[i];
            row.threads += 1;
            row.exited &= t.exited;
            row.kthread |= t.kthread;
            // The main thread names the process and carries its parent and cgroup.
            if t.tid == t.pid || row.ppid == 0 {
                row.comm.clone_from(&t.comm);
                row.ppid = t.ppid;
                row.cgroup_id = t.cgroup_id;
            }
        }
        for (t, &i) in threads.iter().zip(at.iter()) {
            let row = &mut rows[i];
            advance(&mut self.prev_threads, t, |total, delta| {
                row.total.add(total);
                row.delta.add(delta);
                // A thread that exited in a process still running: kept for the process's
                // total (a process that exits here is forgotten with its threads).
                if t.exited && !row.exited {
                    let d = self.dead.entry(t.pid).or_default();
                    d.total.add(total);
                    d.threads += 1;
                    if d.threads == 1 || t.tid == t.pid {
                        d.comm.clone_from(&t.comm);
                        d.cgroup_id = t.cgroup_id;
                    }
                    d.kthread |= t.kthread;
                }
            });
        }
        if !self.dead.is_empty() {
            for row in rows.iter().filter(|r| r.exited) {
                self.dead.remove(&row.pid);
            }
        }
        rows
    }

    fn cpu_rows(&mut self, snap: &Snapshot) -> Vec<CpuRow> {
        snap.cpus
            .iter()
            .map(|c| {
                let prev = self.prev_cpus.get(&c.cpu).copied().unwrap_or(CpuCounters {
                    cpu: c.cpu,
                    ..Default::default()
                });
                // Exported as counters: never lower than the last interval showed.
                let c = &c.at_least(&prev);
                self.prev_cpus.insert(c.cpu, *c);
                let d = |now: u64, then: u64| now.saturating_sub(then);
                let idle = d(c.idle_ns, prev.idle_ns);
                let task = d(c.task_ns, prev.task_ns);
                let hard = d(c.hardirq_ns, prev.hardirq_ns);
                let mut soft = [0u64; NR_SOFTIRQS];
                for (i, s) in soft.iter_mut().enumerate() {
                    *s = d(c.softirq_ns[i], prev.softirq_ns[i]);
                }
                // The CPU's four parts add up to the time it has been watched; before its first
                // event that is less than the interval, so shares are of what was measured.
                let measured = (idle + task + hard + soft.iter().sum::<u64>()).max(1);
                let denom = measured as f64;
                let p = |ns: u64| ns as f64 * 100.0 / denom;
                CpuRow {
                    cpu: c.cpu,
                    busy_pct: p(task),
                    idle_pct: p(idle),
                    irq_pct: p(hard),
                    softirq_pct: p(soft.iter().sum()),
                    softirq_pct_by_vec: soft.map(p),
                    total: *c,
                }
            })
            .collect()
    }

    fn syscall_rows(&self, snap: &Snapshot, rows: &[Row]) -> Vec<SyscallRow> {
        if snap.syscalls.is_empty() {
            return Vec::new();
        }
        let shown: std::collections::HashSet<u32> = rows.iter().map(|r| r.pid).collect();
        let mut out: Vec<SyscallRow> = snap
            .syscalls
            .iter()
            .filter(|s| shown.contains(&s.pid))
            .map(|s| SyscallRow {
                pid: s.pid,
                nr: s.nr,
                name: s.name.clone(),
                count: s.count,
                total_ns: s.total_ns,
                errors: s.errors,
            })
            .collect();
        out.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.pid.cmp(&b.pid))
                .then(a.nr.cmp(&b.nr))
        });
        out.truncate(MAX_SYSCALL_ROWS);
        out
    }
}

/// Adds a row's cumulative cost to its bucket: KERNEL for kernel threads, processes for rows the
/// filter keeps, OTHER for the rest.
fn bucket_row(b: &mut Buckets, r: &Row, filter: &Filter) {
    if r.kthread {
        b.kernel_ns += r.total.cost_ns();
    } else if filter.keeps(r.pid, r.tid, &r.comm, r.cgroup_id) {
        b.processes_ns += r.total.cost_ns();
    } else {
        b.other_ns += r.total.cost_ns();
    }
}

/// A thread's row without its counters.
fn thread_row(t: &ThreadSample) -> Row {
    Row {
        pid: t.pid,
        tid: Some(t.tid),
        ppid: t.ppid,
        comm: t.comm.clone(),
        cgroup_id: t.cgroup_id,
        threads: 1,
        exited: t.exited,
        kthread: t.kthread,
        ..Row::default()
    }
}

/// Brings thread `t`'s previous counters up to this read and hands `f` its total since attach
/// (never lower than the last read showed) and its share of this interval. A thread met for the
/// first time is its own total and share, handed over as they are (no copy: most threads under
/// a fork loop are met once, exited).
fn advance(
    prev: &mut HashMap<u32, Counters>,
    t: &ThreadSample,
    f: impl FnOnce(&Counters, &Counters),
) {
    if t.exited {
        match prev.remove(&t.tid) {
            Some(p) => {
                let total = t.counters.max(&p);
                f(&total, &total.since(&p));
            }
            None => f(&t.counters, &t.counters),
        }
        return;
    }
    match prev.entry(t.tid) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            let p = e.get_mut();
            let total = t.counters.max(p);
            f(&total, &total.since(p));
            *p = total;
        }
        std::collections::hash_map::Entry::Vacant(e) => {
            f(&t.counters, &t.counters);
            e.insert(t.counters);
        }
    }
}
