//! Clusters: the frequent self-loops, loops and chains of one thread's syscall graph, how often
//! each ran, the kernel crossings a replacement saves, and the call sites they come from.
//!
//! Counts (N), for a path p0 -> p1 -> ... of L calls, T(a, b, c) the trigram count (c ran right
//! after b, which ran right after a) and w(a, b) the edge weight:
//! - self-loop A -> A: w(A, A), the times A directly followed itself. Exact. (T(A, A, A) would
//!   undercount: it misses the first repeat of every run.)
//! - chain of 2 calls: w(p0, p1). Exact.
//! - with trigram data (the thread has a transition with `before` set):
//!   - chain of L >= 3 calls: the smallest of its L-2 trigrams T(p_i, p_i+1, p_i+2). Every
//!     occurrence holds each of them once (its nodes are distinct, so occurrences cannot
//!     overlap): an upper bound, exact for L = 3 (the chain is its trigram).
//!   - loop of L >= 2 calls: N counts the runs of the closed walk p0 -> ... -> p_L-1 -> p0
//!     (L + 1 calls; k rounds in a row are k runs, overlapping at p0). It holds the L-1 trigrams
//!     (p_i, p_i+1, p_i+2 mod L) for i < L-1, not (p_L-1, p0, p1), which straddles two rounds
//!     and runs once fewer per instance of the loop; N is the smallest of those L-1. Exact for
//!     L = 2: T(A, B, A) is the number of runs of A -> B -> A (T(B, A, B) is not counted); an
//!     upper bound for L >= 3. A loop starts where the trigram left out is its rarest wrapped
//!     one, which makes N largest (ties: after its lightest edge, then at its busiest node).
//!   - Search: cycles and chains only take a step whose trigram with the two calls before it
//!     ran at least min_count times; a loop may have one such rare trigram among its L wrapped
//!     ones (the one left out). A path through a triple that never ran is no candidate, and one
//!     whose count falls below min_count is no cluster.
//! - without trigram data: chains of 3+ calls and loops count the smallest edge weight on the
//!   path, an upper bound (the heaviest edges need not be taken by the same occurrences); a loop
//!   starts after its lightest edge.
//!
//! `Cluster::count_exact` is true when the rule above is exact and no better cluster used any
//! of the path's edges or trigrams (see Overlap).
//!
//! Crossings saved (N = count, L = calls in the path or in one loop iteration):
//! - a single call for a whole run or loop (writev, sendmmsg, close_range, copy_file_range, ...):
//!   a loop instance that goes round its L edges k times makes k*L + 1 calls and becomes one
//!   call, so the cluster saves N*L (a self-loop: N, its edge weight, exactly); a chain that is a
//!   run of one syscall saves N*(L-1);
//! - a multi-call runs one chain occurrence or one loop iteration in one crossing: N*(L-1); a run
//!   of one syscall is batched whole: N*L for a loop, N for a self-loop;
//! - a partial multi-call batches only the runs of batchable calls: N * sum(run length - 1);
//! - epoll and "none": 0 (epoll saves work per call, not crossings).
//!
//! Overlap: clusters are taken greedily, most crossings saved first (then suggestions before
//! "none", loops before chains, higher count, longer path); each taken cluster uses up N of every
//! edge it covers and of every trigram its count is taken over, and the others are re-counted on
//! what is left (the smallest of what is left on their edges and trigrams, so nothing goes below
//! 0): no transition is counted twice and a chain inside a taken loop disappears. Epoll loops save
//! no crossings and are taken in a separate pass on the full counts: a poll loop is reported even
//! when a batchable chain inside it was taken.
//!
//! Candidates: every self-loop; every simple cycle of 2..=max_len nodes over edges of weight at
//! least min_count (the 12 heaviest out-edges of each node, a bounded search); and chains grown
//! from the 256 heaviest edges, forward then backward while that raises N*(L-1) (see
//! `search::grow_chain`).

mod count;
mod group;
mod search;

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::costs::{Alternative, Saving};
use crate::graph::Graph;
use crate::model::{CallSiteFrame, Node};
use crate::suggest::{Kind, Shape, Suggestion};
use crate::Options;
use count::{edge_pairs, take_greedily, Candidate, Residual};
pub(crate) use group::group;
pub use group::ClusterGroup;
use search::{Adjacency, Continuations};

/// Heaviest edges a chain is grown from, per thread.
const CHAIN_SEEDS: usize = 256;

/// A frequent path or loop of one thread, with its suggestion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cluster {
    /// 1 for the cluster that saves the most crossings in the whole profile.
    pub rank: usize,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub shape: Shape,
    /// The calls in order; for loops one iteration, starting after its lightest edge.
    pub path: Vec<Node>,
    /// Occurrences of a chain, iterations of a loop, repeats of a self-loop (see module docs).
    pub count: u64,
    /// `count` is exactly the times the path ran, none of them shared with a better cluster;
    /// false: an upper bound, or what was left after better clusters (see module docs).
    pub count_exact: bool,
    pub crossings_saved: u64,
    /// All calls of the thread, to put `crossings_saved` in proportion.
    pub thread_calls: u64,
    pub suggestion: Suggestion,
    /// Sampled user stacks of the calls on the cluster's edges, most frequent first.
    pub sites: Vec<Site>,
    /// The time the suggestion saves, from a cost table (`Analysis::with_costs`); None without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saving: Option<Saving>,
    /// Every replacement the measured advice weighed, with its saving (empty without a table).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
}

/// A call site of one syscall of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Site {
    /// The node's label, e.g. `write` or `write(fd=1, 4K..8K)`.
    pub syscall: String,
    pub count: u64,
    /// Innermost first.
    pub frames: Vec<CallSiteFrame>,
}

impl Cluster {
    /// The edges the cluster covers, as (from, to) nodes; a loop includes its closing edge.
    pub fn edges(&self) -> Vec<(&Node, &Node)> {
        edge_pairs(self.shape, self.path.len())
            .into_iter()
            .map(|(a, b)| (&self.path[a], &self.path[b]))
            .collect()
    }

    /// `read -> write` (a loop: `read -> write -> read`, a self-loop: `write -> write`).
    pub fn path_label(&self) -> String {
        let mut parts: Vec<String> = self.path.iter().map(Node::to_string).collect();
        if self.shape != Shape::Chain {
            parts.push(self.path[0].to_string());
        }
        parts.join(" -> ")
    }
}

/// The clusters of one thread's graph, best first, with rank 0 (ranks are set over the profile).
pub(crate) fn find(
    g: &Graph,
    (pid, tid, comm): (u32, u32, &str),
    options: &Options,
) -> Vec<Cluster> {
    let min = options.min_count.max(1);
    let trigrams = g.has_trigrams();
    let n = g.nodes.len();
    let mut adj = Adjacency {
        out: vec![Vec::new(); n],
        inn: vec![Vec::new(); n],
        out_total: vec![0; n],
        in_total: g.nodes.iter().map(|s| s.calls).collect(),
    };
    let mut candidates = Vec::new();
    for e in &g.edges {
        let Some(from) = e.from else { continue };
        adj.out_total[from] += e.count;
        if e.count < min {
            continue;
        }
        if from == e.to {
            candidates.push(Candidate::new(g, trigrams, Shape::SelfLoop, vec![from]));
        } else {
            adj.out[from].push((e.to, e.count));
            adj.inn[e.to].push((from, e.count));
        }
    }
    for list in adj.out.iter_mut().chain(adj.inn.iter_mut()) {
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        list.truncate(search::FANOUT);
    }
    let max_len = options.max_len.max(2);
    for cycle in search::cycles(&adj.out, max_len, trigrams.then_some((g, min))) {
        candidates.push(Candidate::new(g, trigrams, Shape::Loop, cycle));
    }
    let next = trigrams.then(|| Continuations::new(g, min));
    let mut seen = HashSet::new();
    let mut seeds: Vec<(usize, usize, u64)> = (0..n)
        .flat_map(|a| adj.out[a].iter().map(move |&(b, w)| (a, b, w)))
        .collect();
    seeds.sort_by(|x, y| y.2.cmp(&x.2).then((x.0, x.1).cmp(&(y.0, y.1))));
    for &seed in seeds.iter().take(CHAIN_SEEDS) {
        let chain = search::grow_chain(&adj, next.as_ref(), seed, max_len);
        if seen.insert(chain.clone()) {
            candidates.push(Candidate::new(g, trigrams, Shape::Chain, chain));
        }
    }

    let residual = Residual::new(g, &candidates);
    // Epoll saves no crossings, so its loops do not compete with the others for transitions.
    let (epoll, batching): (Vec<Candidate>, Vec<Candidate>) = candidates
        .into_iter()
        .partition(|c| c.plan.suggestion.kind == Kind::Epoll);
    let mut clusters = Vec::new();
    for set in [batching, epoll] {
        for t in take_greedily(&set, residual.clone(), min) {
            let c = t.candidate;
            clusters.push(Cluster {
                rank: 0,
                pid,
                tid,
                comm: comm.to_string(),
                shape: c.shape,
                path: c.nodes.iter().map(|&i| g.nodes[i].node.clone()).collect(),
                count: t.count,
                count_exact: t.exact,
                crossings_saved: t.saved,
                thread_calls: g.calls(),
                suggestion: c.plan.suggestion.clone(),
                sites: sites(g, &c.edges, options.sites),
                saving: None,
                alternatives: Vec::new(),
            });
        }
    }
    clusters
}

/// The sampled stacks of the calls on `edges`, merged by (syscall, frames), top `limit`.
fn sites(g: &Graph, edges: &[(usize, usize)], limit: usize) -> Vec<Site> {
    let mut merged: BTreeMap<(String, &[CallSiteFrame]), u64> = BTreeMap::new();
    for &(from, to) in edges {
        let Some(e) = g.edge(Some(from), to) else {
            continue;
        };
        let label = g.nodes[to].node.to_string();
        for s in &e.sites {
            *merged.entry((label.clone(), &s.frames)).or_default() += s.count;
        }
    }
    let mut sites: Vec<Site> = merged
        .into_iter()
        .map(|((syscall, frames), count)| Site {
            syscall,
            count,
            frames: frames.to_vec(),
        })
        .collect();
    sites.sort_by_key(|s| Reverse(s.count));
    sites.truncate(limit);
    sites
}

/// Orders clusters of all threads for the report and numbers them from 1.
pub(crate) fn rank(clusters: &mut [Cluster]) {
    clusters.sort_by(|a, b| {
        b.crossings_saved
            .cmp(&a.crossings_saved)
            .then_with(|| (b.suggestion.kind != Kind::None).cmp(&(a.suggestion.kind != Kind::None)))
            .then_with(|| b.count.cmp(&a.count))
            .then_with(|| (a.pid, a.tid).cmp(&(b.pid, b.tid)))
            .then_with(|| a.path.cmp(&b.path))
    });
    for (i, c) in clusters.iter_mut().enumerate() {
        c.rank = i + 1;
    }
}
