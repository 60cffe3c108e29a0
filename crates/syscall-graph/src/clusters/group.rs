//! Groups: the same cluster found in several threads or processes of one program (a pool of
//! identical workers) listed once.
//!
//! Key: the thread's comm, the shape, the path (the same nodes in the same order, so a loop must
//! also start at the same node) and the suggestion's kind and replacement. Threads of one process
//! and processes with the same comm (nginx workers, a forked pool) group alike; different comms
//! never do. A group's count and crossings saved are its members' sums, its count is exact only
//! when every member's is, its call sites are the members' merged, and groups are ranked like
//! clusters (`rank`), on those sums.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use super::{Cluster, Site};
use crate::model::{CallSiteFrame, Node};
use crate::suggest::{Kind, Shape};

/// One or more clusters with the same comm, shape, path and suggestion, in different threads.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterGroup<'a> {
    /// 1 for the group that saves the most crossings (summed over its members) in the profile.
    pub rank: usize,
    /// Best first (their order in `Analysis::clusters`); never empty. The first gives the
    /// group's comm, shape, path and suggestion (the same for all), and its pid and tid.
    pub members: Vec<&'a Cluster>,
    /// The members' counts, summed.
    pub count: u64,
    /// Every member's count is exact.
    pub count_exact: bool,
    /// The members' crossings saved, summed.
    pub crossings_saved: u64,
    /// All calls of the members' threads.
    pub thread_calls: u64,
    /// The members' call sites merged by (syscall, frames), most frequent first.
    pub sites: Vec<Site>,
}

impl<'a> ClusterGroup<'a> {
    /// The best member: its comm, shape, path and suggestion are the group's.
    pub fn first(&self) -> &'a Cluster {
        self.members[0]
    }

    /// Threads the group spans.
    pub fn threads(&self) -> usize {
        self.members.len()
    }

    /// The members' distinct pids, ascending.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.members.iter().map(|c| c.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }
}

type Key<'a> = (&'a str, Shape, &'a [Node], Kind, Option<&'a str>);

/// Groups `clusters` (ranked, best first) and ranks the groups from 1; `sites` call sites are
/// kept per group.
pub(crate) fn group(clusters: &[Cluster], sites: usize) -> Vec<ClusterGroup<'_>> {
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut members: Vec<Vec<&Cluster>> = Vec::new();
    for c in clusters {
        let key = (
            c.comm.as_str(),
            c.shape,
            c.path.as_slice(),
            c.suggestion.kind,
            c.suggestion.replacement.as_deref(),
        );
        let i = *index.entry(key).or_insert_with(|| {
            members.push(Vec::new());
            members.len() - 1
        });
        members[i].push(c);
    }
    let mut groups: Vec<ClusterGroup> = members
        .into_iter()
        .map(|m| {
            let sites = if m.len() == 1 {
                m[0].sites.clone()
            } else {
                merge_sites(&m, sites)
            };
            ClusterGroup {
                rank: 0,
                count: m.iter().map(|c| c.count).sum(),
                count_exact: m.iter().all(|c| c.count_exact),
                crossings_saved: m.iter().map(|c| c.crossings_saved).sum(),
                thread_calls: m.iter().map(|c| c.thread_calls).sum(),
                sites,
                members: m,
            }
        })
        .collect();
    // The order of `clusters::rank`, on the sums: a group of one keeps its cluster's place.
    groups.sort_by(|a, b| {
        let (fa, fb) = (a.first(), b.first());
        b.crossings_saved
            .cmp(&a.crossings_saved)
            .then_with(|| {
                (fb.suggestion.kind != Kind::None).cmp(&(fa.suggestion.kind != Kind::None))
            })
            .then_with(|| b.count.cmp(&a.count))
            .then_with(|| (fa.pid, fa.tid).cmp(&(fb.pid, fb.tid)))
            .then_with(|| fa.path.cmp(&fb.path))
    });
    for (i, g) in groups.iter_mut().enumerate() {
        g.rank = i + 1;
    }
    groups
}

/// The members' sites merged by (syscall, frames), top `limit` (ties in key order, as
/// `clusters::sites` orders one thread's).
fn merge_sites(members: &[&Cluster], limit: usize) -> Vec<Site> {
    let mut merged: BTreeMap<(&str, &[CallSiteFrame]), u64> = BTreeMap::new();
    for s in members.iter().flat_map(|c| &c.sites) {
        *merged.entry((&s.syscall, &s.frames)).or_default() += s.count;
    }
    let mut sites: Vec<Site> = merged
        .into_iter()
        .map(|((syscall, frames), count)| Site {
            syscall: syscall.to_string(),
            count,
            frames: frames.to_vec(),
        })
        .collect();
    sites.sort_by_key(|s| Reverse(s.count));
    sites.truncate(limit);
    sites
}
