//! What every report says about the recording before its table: the losses, and how the samples
//! compare with the exact CPU time of the accounting.
//!
//! On machines whose idle CPUs take few or no cpu-clock samples (a VM whose idle vCPU is not
//! running: perf sees the same), shares of *samples* over-state every busy routine: one busy CPU
//! of two reads as 98% instead of 50%. Reports that print a share of all CPU (`% all`) therefore
//! divide sampled time (samples x period) by the exact CPU time of the recording (wall x CPUs, from
//! the accounting) when the profile has it, and say when idle was under-sampled, with both figures.

use pkprof_profile::{Bucket, Lost, Profile, UserStacks};

use crate::format::{percent, thousands};

/// `lost: none`, or `lost: ring buffer full 761, user stacks unreadable 3`: every count that is
/// not zero, as `record`'s summary counts them.
pub fn lost_text(lost: &Lost) -> String {
    let parts: Vec<String> = lost
        .parts()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{what} {n}"))
        .collect();
    if parts.is_empty() {
        "lost: none".into()
    } else {
        format!("lost: {}", parts.join(", "))
    }
}

/// How far the user stacks were unwound, as `record`'s summary and every report's header say it:
/// `user stacks: 9,812 complete (98.1%), truncated 190: 120 stack window, 70 no unwind info`
/// (reasons by count, largest first). None when the profile counted no user stack (written
/// before pkprof counted them, or no sample had a user stack).
pub fn user_stacks_text(u: &UserStacks) -> Option<String> {
    // Summed wide: a crafted file may hold counts that overflow u64 together.
    let truncated: u128 = u.truncated.iter().map(|(_, n)| u128::from(*n)).sum();
    let all = u128::from(u.complete) + truncated;
    if all == 0 {
        return None;
    }
    let mut line = format!(
        "user stacks: {} complete ({:.1}%), truncated {}",
        thousands(u.complete.into()),
        u128::from(u.complete) as f64 * 100.0 / all as f64,
        thousands(truncated)
    );
    let mut reasons: Vec<_> = u.truncated.iter().filter(|(_, n)| *n > 0).collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (i, (reason, n)) in reasons.iter().enumerate() {
        line.push_str(if i == 0 { ": " } else { ", " });
        line.push_str(&format!("{} {}", thousands((*n).into()), reason.label()));
    }
    Some(line)
}

/// Samples against the exact CPU time of one profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coverage {
    /// Exact CPU time of the recording (wall x CPUs) and its idle part, from the accounting; 0
    /// when the profile has no accounting.
    pub exact_ns: u64,
    pub exact_idle_ns: u64,
    /// Time the samples stand for (samples x period), all and in the IDLE bucket.
    pub sampled_ns: u128,
    pub sampled_idle_ns: u128,
}

/// Idle is called under-sampled when its sampled share of the CPU time falls short of its exact
/// share by more than this many percentage points.
const UNDER_SAMPLED_POINTS: f64 = 5.0;

impl Coverage {
    pub fn of(p: &Profile) -> Coverage {
        let period = u128::from(p.meta.period_ns);
        let (mut all, mut idle) = (0u128, 0u128);
        for s in &p.samples {
            all += u128::from(s.count);
            if s.bucket == Bucket::Idle {
                idle += u128::from(s.count);
            }
        }
        Coverage {
            exact_ns: p.meta.cpu_time.total_ns,
            exact_idle_ns: p.meta.cpu_time.idle_ns,
            sampled_ns: all * period,
            sampled_idle_ns: idle * period,
        }
    }

    /// The profile has the exact CPU time, so `% all` can be of it.
    pub fn exact(&self) -> bool {
        self.exact_ns > 0
    }

    /// `samples` (of `period_ns` each) as a percentage of all CPU: of the exact CPU time when
    /// known, else of all samples (`total_samples`). When the samples stand for more than the
    /// exact time (a nominal period slightly off), of the sampled time, so shares never pass 100%.
    pub fn percent_all(&self, samples: u64, period_ns: u64, total_samples: u64) -> f64 {
        if !self.exact() {
            return percent(samples, total_samples);
        }
        let part = u128::from(samples) * u128::from(period_ns);
        percent(part, u128::from(self.exact_ns).max(self.sampled_ns))
    }

    /// Exact and sampled idle shares, in percent of the CPU time, when idle was under-sampled.
    pub fn under_sampled_idle(&self) -> Option<(f64, f64)> {
        if !self.exact() || self.sampled_ns == 0 {
            return None;
        }
        let exact = self.exact_idle_ns as f64 * 100.0 / self.exact_ns as f64;
        let sampled = self.sampled_idle_ns as f64 * 100.0 / self.sampled_ns as f64;
        (exact - sampled > UNDER_SAMPLED_POINTS).then_some((exact, sampled))
    }

    /// How `% all` is computed, in one line.
    pub fn all_text(&self) -> String {
        if !self.exact() {
            return "% all: of all samples (the profile has no exact CPU time)".into();
        }
        format!(
            "% all: sampled CPU time (samples x period) of the exact {:.2} CPU seconds (wall x CPUs, from the accounting); the samples cover {:.1}% of it",
            self.exact_ns as f64 / 1e9,
            self.sampled_ns as f64 * 100.0 / self.exact_ns as f64
        )
    }

    /// When idle was under-sampled, a line with both figures.
    pub fn idle_text(&self) -> Option<String> {
        let (exact, sampled) = self.under_sampled_idle()?;
        Some(format!(
            "idle under-sampled: the accounting has {exact:.1}% of the CPU time idle, the samples {sampled:.1}% (an idle CPU takes few cpu-clock samples here), so shares of samples over-state busy routines; % all (--dcpi) is of the exact CPU time"
        ))
    }
}

/// The header lines every report prints: the losses, how far user stacks were unwound (when
/// the profile counted it) and, when idle was under-sampled, both figures.
pub fn notes(p: &Profile) -> Vec<String> {
    let mut notes = vec![lost_text(&p.meta.lost)];
    notes.extend(user_stacks_text(&p.meta.user_stacks));
    notes.extend(Coverage::of(p).idle_text());
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_names_each_count() {
        assert_eq!(lost_text(&Lost::default()), "lost: none");
        let l = Lost {
            ring_buffer_full: 761,
            user_stack_errors: 3,
            ..Lost::default()
        };
        assert_eq!(
            lost_text(&l),
            "lost: ring buffer full 761, user stacks unreadable 3"
        );
    }

    #[test]
    fn user_stacks_line() {
        use pkprof_profile::Truncation;
        assert_eq!(user_stacks_text(&UserStacks::default()), None);
        let mut u = UserStacks::default();
        u.add(None, 9_812);
        u.add(Some(Truncation::NoUnwindInfo), 70);
        u.add(Some(Truncation::StackWindow), 120);
        assert_eq!(
            user_stacks_text(&u).unwrap(),
            "user stacks: 9,812 complete (98.1%), truncated 190: 120 stack window, 70 no unwind info"
        );
        let all_complete = UserStacks {
            complete: 5,
            truncated: Vec::new(),
        };
        assert_eq!(
            user_stacks_text(&all_complete).unwrap(),
            "user stacks: 5 complete (100.0%), truncated 0"
        );
        let mut none_complete = UserStacks::default();
        none_complete.add(Some(Truncation::BadFrame), 1_234_567);
        none_complete.add(Some(Truncation::DepthLimit), 1_234_567);
        assert_eq!(
            user_stacks_text(&none_complete).unwrap(),
            "user stacks: 0 complete (0.0%), truncated 2,469,134: 1,234,567 depth limit, 1,234,567 bad frame"
        );
    }

    #[test]
    fn shares_of_exact_time() {
        // 2 CPUs for 1 s, one busy: 100 busy samples of 10 ms, 4 idle samples.
        let c = Coverage {
            exact_ns: 2_000_000_000,
            exact_idle_ns: 1_000_000_000,
            sampled_ns: 104 * 10_000_000,
            sampled_idle_ns: 4 * 10_000_000,
        };
        assert_eq!(c.percent_all(100, 10_000_000, 104), 50.0);
        let (exact, sampled) = c.under_sampled_idle().unwrap();
        assert_eq!(exact, 50.0);
        assert!((sampled - 400.0 / 104.0).abs() < 1e-9);
        let none = Coverage { exact_ns: 0, ..c };
        assert!((none.percent_all(100, 10_000_000, 104) - 10000.0 / 104.0).abs() < 1e-9);
        assert_eq!(none.under_sampled_idle(), None);
    }
}
