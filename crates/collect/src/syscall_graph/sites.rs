//! The call sites of `pkprof syscalls`, counted in user space: each sampled call's user stack is
//! unwound as soon as its record is read (docs/design.md, "User stacks") and counted here under
//! (transition, stack, how the stack ended), as the kernel's site table counted frame-pointer
//! stacks before. The table is bounded: a new site beyond its capacity is counted as lost.

use std::collections::HashMap;

use pkprof_attribution::Truncation;

use super::EdgeId;

/// Distinct (transition, stack) entries kept by default (the kernel's site table had as many).
pub const DEFAULT_MAX_SITES: usize = 16384;

/// One call site of a transition: an unwound user stack and how many sampled calls had it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSite {
    /// Leaf first: [0] the ip after the syscall instruction, then return addresses as read.
    pub frames: Vec<u64>,
    /// None: the stack reached the thread's entry; else why it stopped.
    pub end: Option<Truncation>,
    pub count: u64,
}

/// An unwound stack: frames leaf first and how it ended.
type Stack = (Vec<u64>, Option<Truncation>);

/// (transition, stack) -> sampled calls, for at most `capacity` distinct entries.
#[derive(Debug)]
pub struct SiteTable {
    sites: HashMap<EdgeId, HashMap<Stack, u64>>,
    len: usize,
    capacity: usize,
    full: u64,
    failed: u64,
}

impl Default for SiteTable {
    fn default() -> Self {
        SiteTable::new(DEFAULT_MAX_SITES)
    }
}

impl SiteTable {
    pub fn new(capacity: usize) -> Self {
        SiteTable {
            sites: HashMap::new(),
            len: 0,
            capacity,
            full: 0,
            failed: 0,
        }
    }

    /// Counts one sampled call of transition `edge` with this unwound stack. An empty stack is
    /// counted as failed; a new entry beyond the capacity as full.
    pub fn add(&mut self, edge: EdgeId, frames: Vec<u64>, end: Option<Truncation>) {
        if frames.is_empty() {
            self.failed += 1;
            return;
        }
        let stacks = self.sites.entry(edge).or_default();
        let key = (frames, end);
        if let Some(n) = stacks.get_mut(&key) {
            *n += 1;
        } else if self.len < self.capacity {
            stacks.insert(key, 1);
            self.len += 1;
        } else {
            self.full += 1;
        }
    }

    /// The call sites of `edge`, most frequent first (then by stack, for a stable order).
    pub(super) fn take(&mut self, edge: &EdgeId) -> Vec<RawSite> {
        let mut sites: Vec<RawSite> = self
            .sites
            .remove(edge)
            .unwrap_or_default()
            .into_iter()
            .map(|((frames, end), count)| RawSite { frames, end, count })
            .collect();
        sites.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.frames.cmp(&b.frames)));
        sites
    }

    /// Sampled calls not counted because the table was full.
    pub fn full(&self) -> u64 {
        self.full
    }

    /// Sampled calls whose stack came out empty.
    pub fn failed(&self) -> u64 {
        self.failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(to: u64) -> EdgeId {
        EdgeId(1, 1, u64::MAX, 0, to)
    }

    #[test]
    fn same_stacks_add_up_and_the_capacity_holds() {
        let mut t = SiteTable::new(2);
        t.add(edge(1), vec![10, 20], None);
        t.add(edge(1), vec![10, 20], None);
        t.add(edge(1), vec![10, 20], Some(Truncation::StackWindow));
        t.add(edge(2), vec![30], None); // a third entry: over capacity
        t.add(edge(2), Vec::new(), None);
        assert_eq!((t.full(), t.failed()), (1, 1));
        let sites = t.take(&edge(1));
        assert_eq!(
            sites,
            vec![
                RawSite {
                    frames: vec![10, 20],
                    end: None,
                    count: 2
                },
                RawSite {
                    frames: vec![10, 20],
                    end: Some(Truncation::StackWindow),
                    count: 1
                },
            ]
        );
        assert!(t.take(&edge(2)).is_empty());
    }
}
