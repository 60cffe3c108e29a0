//! Wall-time classes of a thread (docs/design.md, "Wall time"): from the instant pkprof starts
//! following a thread, every nanosecond is running (on CPU), waiting for a CPU (runqueue) or
//! blocked, by reason. This module owns the class names, the counters and the runqueue-wait
//! histogram's buckets and quantiles; the kernel side fills them (the wall chain).

use serde::{Serialize, Serializer};

/// Block reasons, in the order of `enum pkprof_block_reason` after RUNNABLE (which is the runqueue
/// wait, `WallCounters::runq_ns`).
pub const NR_BLOCK_REASONS: usize = 7;

/// Block reason names, indexed as `WallCounters::blocked_ns` (and as `reason` label values).
pub const BLOCK_REASONS: [&str; NR_BLOCK_REASONS] =
    ["io", "net", "ipc", "lock", "sleep", "poll", "other"];

/// Buckets of the runqueue-wait histogram: two per power of two of nanoseconds.
pub const RUNQ_HIST: usize = 64;

/// Counts of runqueue waits by length: bucket `i` holds waits in `[lower(i), lower(i + 1))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunqHist(pub [u64; RUNQ_HIST]);

impl Default for RunqHist {
    fn default() -> Self {
        RunqHist([0; RUNQ_HIST])
    }
}

// serde derives arrays up to 32 elements only: a plain sequence.
impl Serialize for RunqHist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.as_slice().serialize(s)
    }
}

impl RunqHist {
    /// The smallest wait (ns) bucket `i` holds: `2^(i/2)`, or 1.5 times that for odd `i`
    /// (bucket 0 and 1 hold 0..2 and 2..3 ns... as the kernel side's `runq_bucket`).
    pub fn lower(i: usize) -> u64 {
        if i < 2 {
            return if i == 0 { 0 } else { 1 };
        }
        let p = 1u64 << (i / 2);
        if i % 2 == 1 {
            p + p / 2
        } else {
            p
        }
    }

    /// The bucket of a wait of `ns` (the kernel side's `runq_bucket`).
    pub fn bucket(ns: u64) -> usize {
        if ns < 2 {
            return 0;
        }
        let lg = 63 - ns.leading_zeros() as usize;
        (2 * lg + ((ns >> (lg - 1)) & 1) as usize).min(RUNQ_HIST - 1)
    }

    pub fn count(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The `q` quantile (0..=1) as the upper bound of its bucket (ns), never above `max_ns` when
    /// that is known (non-zero); None without waits.
    pub fn quantile(&self, q: f64, max_ns: u64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let upper = if i + 1 < RUNQ_HIST {
                    RunqHist::lower(i + 1)
                } else {
                    u64::MAX
                };
                return Some(if max_ns > 0 { upper.min(max_ns) } else { upper });
            }
        }
        None
    }
}

/// One thread's (or a sum of threads') wall time by class, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WallCounters {
    /// Time followed: from the thread's first wakeup or switch-out seen to its exit or the read.
    /// `running_ns + runq_ns + blocked_ns` add up to it.
    pub wall_ns: u64,
    /// On CPU within `wall_ns`: task time and the interrupts Linux billed to it.
    pub running_ns: u64,
    /// Runnable but not running: from a wakeup or preemption to the switch-in.
    pub runq_ns: u64,
    /// Blocked, by reason (`BLOCK_REASONS`).
    pub blocked_ns: [u64; NR_BLOCK_REASONS],
    /// Off-CPU periods ended, by reason (blocked ones) and preemptions.
    pub blocks: [u64; NR_BLOCK_REASONS],
    pub preemptions: u64,
    /// Runqueue waits ended, and their lengths.
    pub runq_waits: u64,
    pub runq_hist: RunqHist,
    /// Longest runqueue wait since attach (a sum of threads: the longest of them).
    pub runq_max_ns: u64,
    /// Off-CPU periods that ended without their wakeup seen: counted as blocked to the end.
    pub wake_unseen: u64,
    /// Switches of the thread the kernel never reported (see `LostCounters::missed_switch`): the
    /// time they hide (on or off CPU, unknown) is OTHER.
    pub switch_unseen: u64,
}

impl WallCounters {
    pub fn blocked_total_ns(&self) -> u64 {
        self.blocked_ns.iter().sum()
    }

    /// The classes' sum, `wall_ns` when every nanosecond is accounted.
    pub fn classes_ns(&self) -> u64 {
        self.running_ns + self.runq_ns + self.blocked_total_ns()
    }

    /// Sets the summable fields to `f` of themselves and `o`'s, in place; `runq_max_ns` is the
    /// callers'.
    fn zip_mut(&mut self, o: &WallCounters, f: impl Fn(u64, u64) -> u64) {
        let arr = |a: &mut [u64], b: &[u64]| {
            for (a, b) in a.iter_mut().zip(b) {
                *a = f(*a, *b);
            }
        };
        // Every field named: a new one does not build until it is placed here.
        let WallCounters {
            wall_ns,
            running_ns,
            runq_ns,
            blocked_ns,
            blocks,
            preemptions,
            runq_waits,
            runq_hist,
            runq_max_ns: _,
            wake_unseen,
            switch_unseen,
        } = o;
        for (a, b) in [
            (&mut self.wall_ns, wall_ns),
            (&mut self.running_ns, running_ns),
            (&mut self.runq_ns, runq_ns),
            (&mut self.preemptions, preemptions),
            (&mut self.runq_waits, runq_waits),
            (&mut self.wake_unseen, wake_unseen),
            (&mut self.switch_unseen, switch_unseen),
        ] {
            *a = f(*a, *b);
        }
        arr(&mut self.blocked_ns, blocked_ns);
        arr(&mut self.blocks, blocks);
        arr(&mut self.runq_hist.0, &runq_hist.0);
    }

    pub fn add(&mut self, o: &WallCounters) {
        self.zip_mut(o, |a, b| a + b);
        self.runq_max_ns = self.runq_max_ns.max(o.runq_max_ns);
    }

    /// `self - earlier` as an interval whose classes add up to its wall time. A class can go down
    /// between two reads: an off period still open at a read is blocked up to it, and at its
    /// switch-in part of it turns out to have been a wait for the CPU, or running
    /// (docs/design.md, "Wall time"). Such a class counts 0 in the interval, and what it lost
    /// comes out of the classes it moved to: the runqueue first, then running, then the other
    /// reasons. Counts are clamped at zero; `runq_max_ns` stays the maximum since attach.
    pub fn since(&self, earlier: &WallCounters) -> WallCounters {
        let mut r = *self;
        r.zip_mut(earlier, u64::saturating_sub);
        let mut lost = earlier.running_ns.saturating_sub(self.running_ns)
            + earlier.runq_ns.saturating_sub(self.runq_ns);
        for i in 0..NR_BLOCK_REASONS {
            lost += earlier.blocked_ns[i].saturating_sub(self.blocked_ns[i]);
        }
        let mut take = |x: &mut u64| {
            let t = lost.min(*x);
            *x -= t;
            lost -= t;
        };
        take(&mut r.runq_ns);
        take(&mut r.running_ns);
        for b in r.blocked_ns.iter_mut() {
            take(b);
        }
        r
    }

    /// The later of two reads of the same classes (the one with more wall time), whole: a
    /// field-wise maximum would count twice what moved between classes (see [`Self::since`]).
    pub fn later(&self, o: &WallCounters) -> WallCounters {
        let mut r = if self.wall_ns >= o.wall_ns { *self } else { *o };
        r.runq_max_ns = self.runq_max_ns.max(o.runq_max_ns);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_two_per_power_of_two_and_agree_with_their_bounds() {
        // (ns, bucket) as the kernel side's runq_bucket computes them.
        let cases = [
            (0, 0),
            (1, 0),
            (2, 2),
            (3, 3),
            (4, 4),
            (5, 4),
            (6, 5),
            (7, 5),
            (8, 6),
            (1000, 19),
            (1 << 20, 40),
            (3 << 19, 41),
            (u64::MAX, 63),
        ];
        for (ns, b) in cases {
            assert_eq!(RunqHist::bucket(ns), b, "{ns} ns");
        }
        for i in 2..RUNQ_HIST - 1 {
            assert_eq!(RunqHist::bucket(RunqHist::lower(i)), i, "lower({i})");
            assert_eq!(
                RunqHist::bucket(RunqHist::lower(i + 1) - 1),
                i,
                "upper({i})"
            );
        }
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds_capped_by_the_max() {
        let mut h = RunqHist::default();
        assert_eq!(h.quantile(0.5, 0), None);
        // 99 waits of 1000 ns, one of 1 ms.
        h.0[RunqHist::bucket(1000)] += 99;
        h.0[RunqHist::bucket(1_000_000)] += 1;
        let upper_1000 = RunqHist::lower(RunqHist::bucket(1000) + 1);
        assert!(upper_1000 > 1000 && upper_1000 <= 1024 + 512);
        assert_eq!(h.quantile(0.5, 0), Some(upper_1000));
        assert_eq!(h.quantile(0.99, 0), Some(upper_1000));
        assert_eq!(h.quantile(1.0, 1_000_000), Some(1_000_000));
    }

    #[test]
    fn sums_add_and_keep_the_longest_wait() {
        let mut a = WallCounters {
            wall_ns: 10,
            running_ns: 4,
            runq_ns: 1,
            blocked_ns: [5, 0, 0, 0, 0, 0, 0],
            runq_max_ns: 7,
            ..Default::default()
        };
        let b = WallCounters {
            wall_ns: 20,
            running_ns: 20,
            runq_max_ns: 3,
            ..Default::default()
        };
        a.add(&b);
        assert_eq!((a.wall_ns, a.classes_ns(), a.runq_max_ns), (30, 30, 7));
        let d = a.since(&b);
        assert_eq!((d.wall_ns, d.running_ns, d.runq_max_ns), (10, 4, 7));
    }

    /// A thread blocks at 900, is woken at 950 and switched in at 1050. Read at 1000: 100 blocked
    /// (the open period). Read at 2000: 50 blocked, 100 waiting, 950 running. The second
    /// interval's classes add up to its 1000 of wall time: the 50 the runqueue took from the
    /// blocked class come out of its runqueue share; the totals are the later read's.
    #[test]
    fn a_class_that_goes_down_between_reads_keeps_intervals_adding_up() {
        let first = WallCounters {
            wall_ns: 100,
            blocked_ns: [0, 0, 0, 100, 0, 0, 0],
            ..Default::default()
        };
        let second = WallCounters {
            wall_ns: 1100,
            running_ns: 950,
            runq_ns: 100,
            blocked_ns: [0, 0, 0, 50, 0, 0, 0],
            ..Default::default()
        };
        let total = second.later(&first);
        assert_eq!(total, second);
        assert_eq!(first.later(&second), second);
        let d = total.since(&first);
        assert_eq!(d.classes_ns(), d.wall_ns, "{d:?}");
        assert_eq!(
            (d.wall_ns, d.running_ns, d.runq_ns, d.blocked_ns[3]),
            (1000, 950, 50, 0)
        );
        // Time given back to running from the reason (a preempting wakeup) comes out of running.
        let third = WallCounters {
            wall_ns: 1200,
            running_ns: 1090,
            runq_ns: 100,
            blocked_ns: [0, 0, 0, 10, 0, 0, 0],
            ..Default::default()
        };
        let d = third.since(&second);
        assert_eq!(d.classes_ns(), d.wall_ns, "{d:?}");
        assert_eq!((d.running_ns, d.blocked_ns[3]), (100, 0));
    }
}
