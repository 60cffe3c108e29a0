//! Folding samples into named stacks, the one pipeline under the call graph ([`crate::graph`], so
//! the flat profile, the call graph and the DCPI tables) and the HTML export: each report decides
//! which samples count, whose names a sample's frames take (its naming key: bucket and PID, or
//! nothing for plain names) and what a frame is named; this module does the rest, in two passes.
//!
//! 1. [`sum_by_stack`]: the samples kept are summed per distinct (stack, naming key), so that a
//!    million sample groups become one entry per distinct stack and process;
//! 2. [`name_stacks`]: the distinct pairs are walked one naming key at a time, with a frame -> name
//!    table reused across that key's stacks, so each frame is named once per key.

use std::hash::Hash;

use pkprof_profile::{FrameId, Profile, SampleGroup, StackId};

use crate::FastMap;

/// One distinct (stack, naming key) and the samples that had it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Summed {
    /// The naming key, numbered in order of first appearance.
    pub key: u32,
    pub stack: StackId,
    /// The first sample (index into `profile.samples`) with this stack and key: the one whose
    /// bucket and PID name the frames.
    pub first: u32,
    /// Summed wide: a crafted file may hold counts that overflow u64 together.
    pub count: u128,
}

/// The samples kept, summed per distinct (stack, naming key).
pub(crate) struct StackSums {
    /// In order of first appearance.
    pub pairs: Vec<Summed>,
    /// For each sample kept (index into `profile.samples`), its pair; only when asked.
    pub sample_pairs: Vec<(u32, u32)>,
}

/// Sums the samples of `p` that `keep` keeps (called once for every sample, in order) per
/// (stack, `key(sample)`). `per_sample`: also record which pair each kept sample went to.
pub(crate) fn sum_by_stack<K: Copy + Eq + Hash>(
    p: &Profile,
    mut keep: impl FnMut(&SampleGroup) -> bool,
    key: impl Fn(&SampleGroup) -> K,
    per_sample: bool,
) -> StackSums {
    let mut key_ids: FastMap<K, u32> = FastMap::default();
    let mut last: Option<(K, u32)> = None;
    let mut pair_of: FastMap<u64, u32> = FastMap::default();
    pair_of.reserve(p.samples.len().min(4 * p.stacks.len() + 1024));
    let mut pairs: Vec<Summed> = Vec::new();
    let mut sample_pairs: Vec<(u32, u32)> = Vec::new();
    for (i, s) in p.samples.iter().enumerate() {
        if !keep(s) {
            continue;
        }
        let k = key(s);
        // Samples come grouped by process: most look-ups hit the last key.
        let kid = match last {
            Some((lk, id)) if lk == k => id,
            _ => {
                let next = key_ids.len() as u32;
                let id = *key_ids.entry(k).or_insert(next);
                last = Some((k, id));
                id
            }
        };
        let next = pairs.len() as u32;
        let pair = *pair_of
            .entry(u64::from(s.stack) << 32 | u64::from(kid))
            .or_insert(next);
        if pair == next {
            pairs.push(Summed {
                key: kid,
                stack: s.stack,
                first: i as u32,
                count: 0,
            });
        }
        pairs[pair as usize].count += u128::from(s.count);
        if per_sample {
            sample_pairs.push((i as u32, pair));
        }
    }
    StackSums {
        pairs,
        sample_pairs,
    }
}

/// Names the frames of every pair of `sums`, one naming key at a time (then by stack), and hands
/// each pair's named stack (root first) to `emit(pair index, names)`.
///
/// `name(frame, sample)` names a frame as sampled by `sample` (the pair's first sample): `None`
/// as the frame stands for a stack without frames (or a frame id outside the profile's table).
/// It returns the name and whether consecutive repeats of it merge into one (a `--group` is one
/// routine: calls between its members are inside it), or `None` to leave the frame out; it is
/// called once per frame and naming key. A stack left without names is not emitted.
pub(crate) fn name_stacks(
    p: &Profile,
    sums: &StackSums,
    mut name: impl FnMut(Option<FrameId>, &SampleGroup) -> Option<(u32, bool)>,
    mut emit: impl FnMut(usize, &[u32]),
) {
    const UNNAMED: u32 = u32::MAX;
    let mut order: Vec<u32> = (0..sums.pairs.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (sums.pairs[i as usize].key, sums.pairs[i as usize].stack));
    // frame -> name under the current key, valid where stamp == the key + 1; the last slot
    // stands for "no frame".
    let no_frame = p.frames.len();
    let mut stamp = vec![0u32; no_frame + 1];
    let mut name_of = vec![(UNNAMED, false); no_frame + 1];
    let mut scratch: Vec<u32> = Vec::new();
    for &pi in &order {
        let pair = &sums.pairs[pi as usize];
        let s = &p.samples[pair.first as usize];
        let mut named = |f: Option<FrameId>| {
            let slot = f.map_or(no_frame, |f| f as usize);
            if stamp[slot] != pair.key + 1 {
                stamp[slot] = pair.key + 1;
                name_of[slot] = name(f, s).unwrap_or((UNNAMED, false));
            }
            name_of[slot]
        };
        scratch.clear();
        let frames = &p.stacks[pair.stack as usize].frames;
        if frames.is_empty() {
            scratch.push(named(None).0);
        }
        for &f in frames {
            let (n, merge) = named(((f as usize) < no_frame).then_some(f));
            if n == UNNAMED || (merge && scratch.last() == Some(&n)) {
                continue;
            }
            scratch.push(n);
        }
        scratch.retain(|&n| n != UNNAMED);
        if !scratch.is_empty() {
            emit(pi as usize, &scratch);
        }
    }
}
