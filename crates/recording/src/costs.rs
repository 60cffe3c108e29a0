//! What each sample cost: the kernel side's time to build it (stack walk and copy, measured in
//! the BPF program) and user space's time to unwind it, kept as log-scale histograms (bounded
//! memory whatever the run's length); `pkprof record` prints them after its summary.

use std::time::Duration;

/// A histogram of durations in buckets of 1/8 octave (~9% wide) from 1 ns to ~4.6 s.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

const SUB: u32 = 8;
const BUCKETS: usize = 32 * SUB as usize;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }
}

impl Histogram {
    fn bucket(ns: u64) -> usize {
        let ns = ns.max(1) as f64;
        ((ns.log2() * f64::from(SUB)) as usize).min(BUCKETS - 1)
    }

    /// The bucket's upper bound in ns (the value a quantile reports).
    fn upper(i: usize) -> f64 {
        2f64.powf((i as f64 + 1.0) / f64::from(SUB))
    }

    pub fn add(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.total += 1;
    }

    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The `q` quantile (0..=1) in ns, to the histogram's precision; None when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Self::upper(i));
            }
        }
        None
    }
}

/// Per-sample costs of a recording.
#[derive(Clone, Debug, Default)]
pub struct SampleCosts {
    /// Kernel side, every sample.
    pub build: Histogram,
    /// User space, samples with a user stack unwound.
    pub unwind: Histogram,
    /// Processes whose unwinding started (maps captured, tables built) and the longest such
    /// first unwinding.
    pub processes: u64,
    pub slowest_first: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_a_bucket() {
        let mut h = Histogram::default();
        for ns in 1..=1000u64 {
            h.add(ns * 10);
        }
        let med = h.quantile(0.5).unwrap();
        let p99 = h.quantile(0.99).unwrap();
        assert!((med / 5000.0 - 1.0).abs() < 0.1, "{med}");
        assert!((p99 / 9900.0 - 1.0).abs() < 0.1, "{p99}");
        assert_eq!(Histogram::default().quantile(0.5), None);
    }

    #[test]
    fn extremes_stay_in_range() {
        let mut h = Histogram::default();
        h.add(0);
        h.add(u64::MAX);
        assert_eq!(h.len(), 2);
        assert!(h.quantile(1.0).unwrap() > 1e9);
    }
}
