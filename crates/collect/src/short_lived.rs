//! Short-lived processes counted together (`CollectorOptions::fold_short_lived_ns`; docs/design.md,
//! "The agent / Cost"): a process born and gone between two reads that cost less than the
//! threshold becomes part of one row, `SHORT_LIVED_PID` "(short-lived)", instead of a row of its
//! own. Under a fork loop nearly every row a read meets is such a process, and each costs the
//! accountant, `/metrics` and the window a few microseconds; their sum is what a reader of those
//! needs (the window keeps the busiest processes, `/metrics` sums the rest into `other`). Totals
//! stay exact: every nanosecond is in exactly one row.
//!
//! A process is folded whole or not at all, and only when no read has shown any of it before: it
//! was born (its leader's start time, which every thread of it follows) after the previous
//! read ended (its walk and its read of the CPUs' registers), and every thread of it in this
//! read has exited. Its OTHER functions go with it. A thread's entry is read for the last time once its exit is past
//! a grace (reader.rs, for what is billed to it after its exit); a process whose threads have all
//! exited but not all past the grace is held back whole (not shown, not deleted) and folded at a
//! later read: else the tenth of a fork loop's processes that exit in the grace before a read
//! would each get a row. A process with a thread on a CPU at the read is not folded.

use std::collections::{HashMap, HashSet};

use pkprof_accounting::{Counters, OtherFnSample, ThreadSample, SHORT_LIVED_PID};

use crate::skel::types::pkprof_thread;

/// The row's command name.
const COMM: &str = "(short-lived)";

/// A process among a read's candidates.
#[derive(Default)]
struct Process {
    cost_ns: u64,
    /// Its leader is a candidate and no thread of it is outside the candidates or on a CPU.
    whole: bool,
    /// Every thread of it is read for the last time (`ThreadSample::exited`).
    all_final: bool,
}

/// What a read does with a candidate's process.
#[derive(PartialEq, Eq)]
enum Verdict {
    Fold,
    /// Whole and small, a thread of it still in its exit grace: to a later read.
    Hold,
    Show,
}

/// What has been folded since attach, and when the last read ended.
#[derive(Debug, Default)]
pub(crate) struct ShortLived {
    /// Folded when a process cost less than this (0: off).
    threshold_ns: u64,
    counters: Counters,
    processes: u64,
    /// A process folded was a target of `record` (every user process is, under the agent).
    target: bool,
    /// CLOCK_MONOTONIC when the last read ended (the thread table walked, the CPUs read).
    prev_read_end_ns: u64,
    /// The threads of the processes held back by the last read (none of them shown yet).
    held: HashSet<u32>,
    /// The folded threads' OTHER blocked time by kernel return address, cumulative: (ns, count).
    other_fns: HashMap<u64, (u64, u64)>,
}

impl ShortLived {
    pub(crate) fn new(threshold_ns: u64) -> Self {
        ShortLived {
            threshold_ns,
            ..ShortLived::default()
        }
    }

    /// Whether thread `tid` (entry `t`) may be part of a folded process: exited, never shown by
    /// a read (its process born since the last read ended, or held back by the last read).
    pub(crate) fn candidate(&self, tid: u32, t: &pkprof_thread) -> bool {
        self.threshold_ns != 0
            && t.exit_ns != 0
            && t.kthread == 0
            && (t.leader_start_ns > self.prev_read_end_ns || self.held.contains(&tid))
    }

    /// This read ended at `now`: a process born since is shown by no read yet.
    pub(crate) fn read_ended(&mut self, now: u64) {
        self.prev_read_end_ns = now;
    }

    /// Folds the candidates of whole processes that cost less than the threshold and whose
    /// threads are all read for the last time (`ThreadSample::exited`); holds back those with a
    /// thread still in its grace (their final threads leave `finished`: not deleted yet); the
    /// others go to `out`, which holds the read's other rows. A process with a thread on a CPU
    /// (`running`: a thread without an entry yet gets a row of its own from the CPU's
    /// register) is not folded. Returns the threads folded.
    pub(crate) fn fold(
        &mut self,
        candidates: Vec<ThreadSample>,
        out: &mut Vec<ThreadSample>,
        finished: &mut Vec<u32>,
        running: &HashSet<u32>,
    ) -> HashSet<u32> {
        let mut folded = HashSet::new();
        self.held.clear();
        if candidates.is_empty() {
            return folded;
        }
        let mut by_pid: HashMap<u32, Process> = HashMap::new();
        for c in &candidates {
            let p = by_pid.entry(c.pid).or_insert(Process {
                all_final: true,
                ..Process::default()
            });
            p.cost_ns = p.cost_ns.saturating_add(c.counters.cost_ns());
            p.whole |= c.tid == c.pid;
            p.all_final &= c.exited;
        }
        for pid in out.iter().map(|t| &t.pid).chain(running) {
            if let Some(p) = by_pid.get_mut(pid) {
                p.whole = false;
            }
        }
        let verdict = |pid: u32| match by_pid.get(&pid) {
            Some(p) if p.whole && p.cost_ns < self.threshold_ns && p.all_final => Verdict::Fold,
            Some(p) if p.whole && p.cost_ns < self.threshold_ns => Verdict::Hold,
            _ => Verdict::Show,
        };
        self.processes += (by_pid.keys())
            .filter(|&&p| verdict(p) == Verdict::Fold)
            .count() as u64;
        for c in candidates {
            match verdict(c.pid) {
                Verdict::Fold => {
                    self.counters.add(&c.counters);
                    self.target |= c.target;
                    folded.insert(c.tid);
                }
                Verdict::Hold => {
                    self.held.insert(c.tid);
                }
                Verdict::Show => out.push(c),
            }
        }
        if !self.held.is_empty() {
            finished.retain(|t| !self.held.contains(t));
        }
        folded
    }

    /// The folded threads' OTHER functions become the row's: taken out of `fns` (their entries
    /// in the kernel go with the threads'), and the row's, cumulative, put in, as a live thread's
    /// are at every read.
    pub(crate) fn take_other_fns(&mut self, fns: &mut Vec<OtherFnSample>, folded: &HashSet<u32>) {
        if !folded.is_empty() {
            fns.retain(|f| {
                if !folded.contains(&f.tid) {
                    return true;
                }
                let e = self.other_fns.entry(f.addr).or_default();
                e.0 += f.ns;
                e.1 += f.count;
                false
            });
        }
        fns.extend(
            self.other_fns
                .iter()
                .map(|(&addr, &(ns, count))| OtherFnSample {
                    tid: SHORT_LIVED_PID,
                    pid: SHORT_LIVED_PID,
                    addr,
                    ns,
                    count,
                }),
        );
    }

    /// Threads the last read held back.
    pub(crate) fn held(&self) -> usize {
        self.held.len()
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
        let mut finished = vec![10, 11, 20, 31, 40, 50, 21];
        let folded = s.fold(candidates, &mut out, &mut finished, &HashSet::new());
        assert_eq!(
            finished.len(),
            7,
            "nothing held back: every final thread is deleted"
        );
        assert_eq!(folded, HashSet::from([10, 11, 50]));
        let mut pids: Vec<u32> = out.iter().map(|t| t.tid).collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![20, 21, 30, 31, 40]);
        assert_eq!(s.processes, 2);
        let row = s.sample().expect("a row once something folded");
        assert_eq!(
            (row.tid, row.pid, row.exited),
            (SHORT_LIVED_PID, SHORT_LIVED_PID, false)
        );
        assert_eq!(row.counters.task_ns + task_sum(&out), before);

        // Cumulative: the next read adds to the same row.
        s.fold(
            vec![thread(60, 60, 1)],
            &mut Vec::new(),
            &mut vec![60],
            &HashSet::new(),
        );
        assert_eq!(s.sample().unwrap().counters.task_ns, 1_600);
        assert_eq!(s.processes, 3);
        // A process with a thread on a CPU (maybe without an entry yet) keeps its rows.
        let mut out = Vec::new();
        let kept = s.fold(
            vec![thread(80, 80, 1)],
            &mut out,
            &mut vec![80],
            &HashSet::from([80]),
        );
        assert!(kept.is_empty() && out.len() == 1);

        // The row's OTHER functions: cumulative over reads, the others' untouched.
        let fn_of = |tid: u32, pid: u32, ns: u64| OtherFnSample {
            tid,
            pid,
            addr: 1,
            ns,
            count: 1,
        };
        let mut fns = vec![fn_of(11, 10, 5), fn_of(21, 20, 5)];
        s.take_other_fns(&mut fns, &folded);
        let row = |ns: u64, count: u64| OtherFnSample {
            count,
            ..fn_of(SHORT_LIVED_PID, SHORT_LIVED_PID, ns)
        };
        assert_eq!(fns, vec![fn_of(21, 20, 5), row(5, 1)]);
        let mut next = vec![fn_of(50, 50, 2)];
        s.take_other_fns(&mut next, &HashSet::from([50]));
        let mut again = Vec::new();
        s.take_other_fns(&mut again, &HashSet::new());
        assert_eq!(next, vec![row(7, 2)]);
        assert_eq!(again, next, "shown at every read");
    }

    #[test]
    fn a_process_with_a_thread_in_its_grace_is_held_back_whole() {
        let mut s = ShortLived::new(1_000);
        // 70: its leader final, a thread of it exited but in its grace (not `exited` yet).
        let mut pending = thread(71, 70, 100);
        pending.exited = false;
        let mut out = Vec::new();
        let mut finished = vec![70];
        let none = HashSet::new();
        let folded = s.fold(
            vec![thread(70, 70, 200), pending],
            &mut out,
            &mut finished,
            &none,
        );
        assert!(
            folded.is_empty() && out.is_empty(),
            "neither folded nor shown"
        );
        assert!(
            finished.is_empty(),
            "the final leader is kept for the next read"
        );
        assert_eq!(s.processes, 0);
        assert!(s.sample().is_none());
        // The next read: both past the grace, born before the last read ended but held: folded.
        s.read_ended(1_000);
        let t = pkprof_thread {
            leader_start_ns: 5,
            exit_ns: 6,
            ..pkprof_thread::default()
        };
        assert!(s.candidate(70, &t) && s.candidate(71, &t));
        assert!(!s.candidate(72, &t), "not held, born before that read");
        let mut finished = vec![70, 71];
        let folded = s.fold(
            vec![thread(70, 70, 200), thread(71, 70, 100)],
            &mut out,
            &mut finished,
            &none,
        );
        assert_eq!(folded, HashSet::from([70, 71]));
        assert_eq!(finished.len(), 2);
        assert_eq!(s.sample().unwrap().counters.task_ns, 300);
        assert!(!s.candidate(70, &t), "held no more");
    }

    #[test]
    fn off_by_default_and_no_row_before_a_fold() {
        let s = ShortLived::new(0);
        assert!(s.sample().is_none());
        let t = pkprof_thread {
            leader_start_ns: 5,
            exit_ns: 7,
            ..pkprof_thread::default()
        };
        assert!(!s.candidate(1, &t));
        let mut on = ShortLived::new(1);
        assert!(on.candidate(1, &t));
        let alive = pkprof_thread { exit_ns: 0, ..t };
        assert!(!on.candidate(1, &alive), "alive");
        let kthread = pkprof_thread { kthread: 1, ..t };
        assert!(!on.candidate(1, &kthread), "a kernel thread");
        on.read_ended(5);
        assert!(
            !on.candidate(1, &t),
            "process born before the last read ended: maybe shown"
        );
        let late_entry = pkprof_thread { start_ns: 9, ..t };
        assert!(
            !on.candidate(1, &late_entry),
            "an entry made since, of a process born before"
        );
    }
}
