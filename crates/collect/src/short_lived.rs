//! Short-lived processes counted together (`CollectorOptions::fold_short_lived_ns`; docs/design.md,
//! "The agent / Cost"): a process born and gone between two reads that cost less than the
//! threshold becomes part of one row, `SHORT_LIVED_PID` "(short-lived)", instead of a row of its
//! own. Under a fork loop nearly every row a read meets is such a process, and each costs the
//! accountant, `/metrics` and the window a few microseconds; their sum is what a reader of those
//! needs (the window keeps the busiest processes, `/metrics` sums the rest into `other`). Totals
//! stay exact: every nanosecond is in exactly one row.
//!
//! A process is folded whole or not at all, and only when no read has shown any of it before: its
//! fork was seen (so its first entry is its birth, and every thread of it was born after), it was
//! born after the previous read's walk ended, and every thread of it in this read is read for the
//! last time (exited). Its OTHER functions go with it.

use std::collections::{HashMap, HashSet};

use pkprof_accounting::{Counters, OtherFnSample, ThreadSample, SHORT_LIVED_PID};

use crate::skel::types::pkprof_thread;

/// The row's command name.
const COMM: &str = "(short-lived)";

/// What has been folded since attach, and where the last walk ended.
#[derive(Debug, Default)]
pub(crate) struct ShortLived {
    /// Folded when a process cost less than this (0: off).
    threshold_ns: u64,
    counters: Counters,
    processes: u64,
    /// A process folded was a target of `record` (every user process is, under the agent).
    target: bool,
    /// CLOCK_MONOTONIC when the last read's walk of the thread table ended.
    prev_walk_end_ns: u64,
}

impl ShortLived {
    pub(crate) fn new(threshold_ns: u64) -> Self {
        ShortLived {
            threshold_ns,
            ..ShortLived::default()
        }
    }

    /// Whether thread entry `t`, read for the last time (`exited`), may be part of a folded
    /// process: never shown by a read, its birth seen.
    pub(crate) fn candidate(&self, t: &pkprof_thread, exited: bool) -> bool {
        self.threshold_ns != 0
            && exited
            && t.ppid != 0
            && t.kthread == 0
            && t.start_ns > self.prev_walk_end_ns
    }

    /// The walk of this read ended at `now`.
    pub(crate) fn walked(&mut self, now: u64) {
        self.prev_walk_end_ns = now;
    }

    /// Folds the candidates of whole processes that cost less than the threshold; the others go
    /// to `out`, which holds the read's other rows. Returns the threads folded.
    pub(crate) fn fold(
        &mut self,
        candidates: Vec<ThreadSample>,
        out: &mut Vec<ThreadSample>,
    ) -> HashSet<u32> {
        let mut folded = HashSet::new();
        if candidates.is_empty() {
            return folded;
        }
        // Per process: its cost, and whether it may fold (its leader is a candidate, and no
        // thread of it is outside the candidates).
        let mut by_pid: HashMap<u32, (u64, bool)> = HashMap::new();
        for c in &candidates {
            let e = by_pid.entry(c.pid).or_default();
            e.0 = e.0.saturating_add(c.counters.cost_ns());
            e.1 |= c.tid == c.pid;
        }
        for t in out.iter() {
            if let Some(e) = by_pid.get_mut(&t.pid) {
                e.1 = false;
            }
        }
        let folds =
            |pid: u32| matches!(by_pid.get(&pid), Some(&(cost, true)) if cost < self.threshold_ns);
        self.processes += by_pid.keys().filter(|&&p| folds(p)).count() as u64;
        for c in candidates {
            if folds(c.pid) {
                self.counters.add(&c.counters);
                self.target |= c.target;
                folded.insert(c.tid);
            } else {
                out.push(c);
            }
        }
        folded
    }

    /// The folded threads' OTHER functions become the row's.
    pub(crate) fn relabel(&self, fns: &mut [OtherFnSample], folded: &HashSet<u32>) {
        for f in fns.iter_mut().filter(|f| folded.contains(&f.tid)) {
            f.tid = SHORT_LIVED_PID;
            f.pid = SHORT_LIVED_PID;
        }
    }

    /// Processes folded since attach.
    pub(crate) fn processes(&self) -> u64 {
        self.processes
    }

    /// The row, cumulative since attach, once a process has been folded.
    pub(crate) fn sample(&self) -> Option<ThreadSample> {
        (self.processes > 0).then(|| ThreadSample {
            tid: SHORT_LIVED_PID,
            pid: SHORT_LIVED_PID,
            comm: COMM.to_string(),
            counters: self.counters,
            target: self.target,
            ..ThreadSample::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: u32, pid: u32, task_ns: u64) -> ThreadSample {
        ThreadSample {
            tid,
            pid,
            comm: "t".into(),
            counters: Counters {
                task_ns,
                ..Counters::default()
            },
            exited: true,
            ..ThreadSample::default()
        }
    }

    fn task_sum(rows: &[ThreadSample]) -> u64 {
        rows.iter().map(|r| r.counters.task_ns).sum()
    }

    #[test]
    fn only_whole_small_processes_fold_and_nothing_is_lost() {
        let mut s = ShortLived::new(1_000);
        // 10: a process of two threads, both candidates, 600 ns: folds.
        // 20: leader a candidate, a thread of it still alive (in `out`): stays.
        // 30: a thread born since the last read whose leader is older (not a candidate): stays.
        // 40: one thread over the threshold: stays. 50: under it: folds.
        let candidates = vec![
            thread(10, 10, 400),
            thread(11, 10, 200),
            thread(20, 20, 100),
            thread(31, 30, 100),
            thread(40, 40, 1_000),
            thread(50, 50, 999),
        ];
        let mut out = vec![thread(21, 20, 50), thread(30, 30, 70)];
        let before = task_sum(&candidates) + task_sum(&out);
        let folded = s.fold(candidates, &mut out);
        assert_eq!(folded, HashSet::from([10, 11, 50]));
        let mut pids: Vec<u32> = out.iter().map(|t| t.tid).collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![20, 21, 30, 31, 40]);
        assert_eq!(s.processes(), 2);
        let row = s.sample().expect("a row once something folded");
        assert_eq!(
            (row.tid, row.pid, row.exited),
            (SHORT_LIVED_PID, SHORT_LIVED_PID, false)
        );
        assert_eq!(row.counters.task_ns + task_sum(&out), before);

        // Cumulative: the next read adds to the same row.
        s.fold(vec![thread(60, 60, 1)], &mut Vec::new());
        assert_eq!(s.sample().unwrap().counters.task_ns, 1_600);
        assert_eq!(s.processes(), 3);

        let mut fns = vec![
            OtherFnSample {
                tid: 11,
                pid: 10,
                addr: 1,
                ns: 5,
                count: 1,
            },
            OtherFnSample {
                tid: 21,
                pid: 20,
                addr: 1,
                ns: 5,
                count: 1,
            },
        ];
        s.relabel(&mut fns, &folded);
        assert_eq!((fns[0].tid, fns[0].pid), (SHORT_LIVED_PID, SHORT_LIVED_PID));
        assert_eq!((fns[1].tid, fns[1].pid), (21, 20));
    }

    #[test]
    fn off_by_default_and_no_row_before_a_fold() {
        let s = ShortLived::new(0);
        assert!(s.sample().is_none());
        let t = pkprof_thread {
            ppid: 1,
            start_ns: 5,
            ..pkprof_thread::default()
        };
        assert!(!s.candidate(&t, true));
        let mut on = ShortLived::new(1);
        assert!(on.candidate(&t, true));
        assert!(!on.candidate(&t, false), "alive");
        on.walked(5);
        assert!(
            !on.candidate(&t, true),
            "born before the last walk ended: maybe shown"
        );
        let orphan = pkprof_thread {
            ppid: 0,
            start_ns: 9,
            ..t
        };
        assert!(!on.candidate(&orphan, true), "fork not seen");
    }
}
