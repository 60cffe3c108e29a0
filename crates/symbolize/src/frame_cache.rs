//! Frames by address, bounded between windows for a symbolizer that runs for weeks (the agent,
//! docs/design.md "The agent / Bounded memory"). Each entry carries the generation it was last
//! used in; [`FrameCache::bound`], called only between windows (never inside a batch, whose
//! entries are read back after they are inserted), keeps past its bound only what the window just
//! named. A hand-written generation rather than the `lru` crate: an LRU evicts as it inserts,
//! which would drop a batch's own first entries when one window names more addresses than the
//! bound, and `record`, which never bounds, would pay its bookkeeping for nothing.

use std::collections::HashMap;
use std::hash::Hash;

use pkprof_profile::Frame;

/// Most entries a frame cache keeps when it is bounded (some 400 bytes an address: about
/// 12 MiB); beyond, those the last window did not use go.
pub(crate) const FRAME_CACHE_MAX: usize = 1 << 15;

#[derive(Debug)]
pub(crate) struct FrameCache<K> {
    entries: HashMap<K, (Vec<Frame>, u64)>,
    generation: u64,
}

impl<K> Default for FrameCache<K> {
    fn default() -> Self {
        FrameCache {
            entries: HashMap::new(),
            generation: 0,
        }
    }
}

impl<K: Hash + Eq> FrameCache<K> {
    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    pub fn insert(&mut self, key: K, frames: Vec<Frame>) {
        self.entries.insert(key, (frames, self.generation));
    }

    /// The frames of `key`, marked as used in this generation.
    pub fn get(&mut self, key: &K) -> Option<&Vec<Frame>> {
        let generation = self.generation;
        self.entries.get_mut(key).map(|(frames, used)| {
            *used = generation;
            &*frames
        })
    }

    pub fn retain_keys(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.entries.retain(|k, _| keep(k));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Past `max` entries, keeps only those used since the last call (none when even they are
    /// more than `max`); then a new generation starts.
    pub fn bound(&mut self, max: usize) {
        if self.entries.len() > max {
            let current = self.generation;
            self.entries.retain(|_, (_, used)| *used == current);
            if self.entries.len() > max {
                self.entries = HashMap::new();
            }
        }
        self.generation += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(name: &str) -> Vec<Frame> {
        vec![Frame {
            name: name.into(),
            ..Frame::default()
        }]
    }

    #[test]
    fn past_its_bound_keeps_what_the_last_window_used() {
        let mut c = FrameCache::default();
        for k in 0..4u64 {
            c.insert(k, frames("old"));
        }
        c.bound(4); // within the bound: all stay, a new generation starts
        assert_eq!(c.len(), 4);
        assert!(c.get(&1).is_some());
        c.insert(10, frames("new"));
        c.bound(4); // 5 > 4: only 1 and 10 were used since the last bound
        let mut kept: Vec<u64> = (0..11).filter(|k| c.contains(k)).collect();
        kept.sort_unstable();
        assert_eq!(kept, [1, 10]);
        assert_eq!(c.get(&10).unwrap()[0].name, "new");
        for k in 20..30u64 {
            c.insert(k, frames("burst"));
        }
        c.bound(4); // the window itself named more than the bound: all go
        assert_eq!(c.len(), 0);
    }
}
