//! Clusters: the frequent self-loops, loops and chains of one thread's syscall graph, how often
//! each ran, the kernel crossings a replacement saves, and the call sites they come from.
//!
//! Frequency from edge counts: a self-loop's or a two-call chain's count is its edge's weight
//! (exact); for longer paths and for loops it is the smallest weight on the path (an upper bound:
//! the heaviest edges need not be taken by the same occurrences).
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
//! edge it covers, and the others are re-estimated on what is left, so no transition is counted
//! twice and a chain inside a taken loop disappears. Epoll loops save no crossings and are taken
//! in a separate pass on the full edge weights: a poll loop is reported even when a batchable
//! chain inside it was taken.
//!
//! Candidates: every self-loop; every simple cycle of 2..=max_len nodes over edges of weight at
//! least min_count (the 12 heaviest out-edges of each node, a bounded search); and chains grown
//! from the 256 heaviest edges, forward then backward along the heaviest edge to a new node while
//! that raises N*(L-1) with N estimated from the share of each step (see `grow_chain`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use serde::Serialize;

use crate::graph::Graph;
use crate::model::{Frame, Node};
use crate::suggest::{self, Kind, Shape, Suggestion};
use crate::Options;

/// Out-edges followed per node when looking for loops and chains (heaviest first).
const FANOUT: usize = 12;
/// Search steps per thread when enumerating loops.
const CYCLE_BUDGET: usize = 200_000;
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
    pub crossings_saved: u64,
    /// All calls of the thread, to put `crossings_saved` in proportion.
    pub thread_calls: u64,
    pub suggestion: Suggestion,
    /// Sampled user stacks of the calls on the cluster's edges, most frequent first.
    pub sites: Vec<Site>,
}

/// A call site of one syscall of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Site {
    /// The node's label, e.g. `write` or `write(fd=1, 4K..8K)`.
    pub syscall: String,
    pub count: u64,
    /// Innermost first.
    pub frames: Vec<Frame>,
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

/// Positions (from, to) of the edges of a path of `len` nodes with `shape`.
fn edge_pairs(shape: Shape, len: usize) -> Vec<(usize, usize)> {
    match shape {
        Shape::SelfLoop => vec![(0, 0)],
        Shape::Loop => (0..len).map(|i| (i, (i + 1) % len)).collect(),
        Shape::Chain => (1..len).map(|i| (i - 1, i)).collect(),
    }
}

/// Starts a loop after its lightest edge, which is usually the one taken once fewer per loop
/// instance (write->read in read -> write -> read ... read): poll -> recvfrom -> sendto rather
/// than sendto -> poll -> recvfrom. Ties go to the busiest node.
fn rotate_loop(g: &Graph, nodes: &mut [usize]) {
    let len = nodes.len();
    let weight = |i: usize| g.weight(nodes[i], nodes[(i + 1) % len]);
    let lightest = (0..len).map(weight).min().unwrap_or(0);
    let start = (0..len)
        .filter(|&i| weight(i) == lightest)
        .map(|i| (i + 1) % len)
        .min_by_key(|&i| nodes[i])
        .unwrap_or(0);
    nodes.rotate_left(start);
}

/// Edges of weight >= min_count between distinct nodes, heaviest first, and all weight out of
/// and into each node.
struct Adjacency {
    out: Vec<Vec<(usize, u64)>>,
    inn: Vec<Vec<(usize, u64)>>,
    out_total: Vec<u64>,
    in_total: Vec<u64>,
}

struct Candidate {
    shape: Shape,
    nodes: Vec<usize>,
    edges: Vec<(usize, usize)>,
    plan: suggest::Plan,
}

impl Candidate {
    fn new(g: &Graph, shape: Shape, mut nodes: Vec<usize>) -> Candidate {
        if shape == Shape::Loop {
            rotate_loop(g, &mut nodes);
        }
        let path: Vec<Node> = nodes.iter().map(|&i| g.nodes[i].node.clone()).collect();
        let edges = edge_pairs(shape, nodes.len())
            .into_iter()
            .map(|(a, b)| (nodes[a], nodes[b]))
            .collect();
        Candidate {
            plan: suggest::plan(shape, &path),
            shape,
            nodes,
            edges,
        }
    }

    /// Ordering key on the residual edge weights: crossings saved, then actionable, then loops
    /// before chains, then count, then longer first.
    fn key(&self, residual: &HashMap<(usize, usize), u64>) -> (u64, bool, bool, u64, usize) {
        let count = self.edges.iter().map(|e| residual[e]).min().unwrap_or(0);
        (
            count * self.plan.saved_per_count,
            self.plan.suggestion.kind != Kind::None,
            self.shape != Shape::Chain,
            count,
            self.nodes.len(),
        )
    }
}

/// The clusters of one thread's graph, best first, with rank 0 (ranks are set over the profile).
pub(crate) fn find(
    g: &Graph,
    (pid, tid, comm): (u32, u32, &str),
    options: &Options,
) -> Vec<Cluster> {
    let min = options.min_count.max(1);
    let n = g.nodes.len();
    let mut adj = Adjacency {
        out: vec![Vec::new(); n],
        inn: vec![Vec::new(); n],
        out_total: vec![0; n],
        in_total: g.nodes.iter().map(|s| s.calls).collect(),
    };
    let mut residual = HashMap::new();
    let mut candidates = Vec::new();
    for e in &g.edges {
        let Some(from) = e.from else { continue };
        residual.insert((from, e.to), e.count);
        adj.out_total[from] += e.count;
        if e.count < min {
            continue;
        }
        if from == e.to {
            candidates.push(Candidate::new(g, Shape::SelfLoop, vec![from]));
        } else {
            adj.out[from].push((e.to, e.count));
            adj.inn[e.to].push((from, e.count));
        }
    }
    for list in adj.out.iter_mut().chain(adj.inn.iter_mut()) {
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        list.truncate(FANOUT);
    }
    let max_len = options.max_len.max(2);
    for cycle in cycles(&adj.out, max_len) {
        candidates.push(Candidate::new(g, Shape::Loop, cycle));
    }
    let mut seen = HashSet::new();
    let mut seeds: Vec<(usize, usize, u64)> = (0..n)
        .flat_map(|a| adj.out[a].iter().map(move |&(b, w)| (a, b, w)))
        .collect();
    seeds.sort_by(|x, y| y.2.cmp(&x.2).then((x.0, x.1).cmp(&(y.0, y.1))));
    for &(a, b, w) in seeds.iter().take(CHAIN_SEEDS) {
        let chain = grow_chain(&adj, (a, b, w), max_len);
        if seen.insert(chain.clone()) {
            candidates.push(Candidate::new(g, Shape::Chain, chain));
        }
    }

    // Epoll saves no crossings, so its loops do not compete with the others for transitions.
    let (epoll, batching): (Vec<Candidate>, Vec<Candidate>) = candidates
        .into_iter()
        .partition(|c| c.plan.suggestion.kind == Kind::Epoll);
    let mut clusters = Vec::new();
    for set in [batching, epoll] {
        for (c, count, saved) in take_greedily(&set, residual.clone(), min) {
            clusters.push(Cluster {
                rank: 0,
                pid,
                tid,
                comm: comm.to_string(),
                shape: c.shape,
                path: c.nodes.iter().map(|&i| g.nodes[i].node.clone()).collect(),
                count,
                crossings_saved: saved,
                thread_calls: g.calls(),
                suggestion: c.plan.suggestion.clone(),
                sites: sites(g, &c.edges, options.sites),
            });
        }
    }
    clusters
}

/// Takes candidates best first, each using up its count on every edge it covers, while their
/// count on what is left is at least `min`. Returns (candidate, count, crossings saved).
fn take_greedily(
    candidates: &[Candidate],
    mut residual: HashMap<(usize, usize), u64>,
    min: u64,
) -> Vec<(&Candidate, u64, u64)> {
    // Lazy greedy: keys only fall as edges are used up, so a popped key that is still current
    // is the best one left.
    let mut heap: BinaryHeap<_> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (c.key(&residual), Reverse(i)))
        .collect();
    let mut taken = Vec::new();
    while let Some((key, Reverse(i))) = heap.pop() {
        let c = &candidates[i];
        let now = c.key(&residual);
        if now.3 < min {
            continue;
        }
        if now != key {
            heap.push((now, Reverse(i)));
            continue;
        }
        for e in &c.edges {
            *residual.get_mut(e).expect("candidate edge") -= now.3;
        }
        taken.push((c, now.3, now.0));
    }
    taken
}

/// Simple cycles of 2..=max_len nodes, each listed once, starting at its smallest node index.
fn cycles(out: &[Vec<(usize, u64)>], max_len: usize) -> Vec<Vec<usize>> {
    struct Search<'a> {
        out: &'a [Vec<(usize, u64)>],
        max_len: usize,
        budget: usize,
        path: Vec<usize>,
        on_path: Vec<bool>,
        found: Vec<Vec<usize>>,
    }
    impl Search<'_> {
        fn visit(&mut self, start: usize, v: usize) {
            for &(u, _) in &self.out[v] {
                if self.budget == 0 {
                    return;
                }
                self.budget -= 1;
                if u == start {
                    self.found.push(self.path.clone());
                } else if u > start && !self.on_path[u] && self.path.len() < self.max_len {
                    self.path.push(u);
                    self.on_path[u] = true;
                    self.visit(start, u);
                    self.on_path[u] = false;
                    self.path.pop();
                }
            }
        }
    }
    let mut s = Search {
        out,
        max_len,
        budget: CYCLE_BUDGET,
        path: Vec::new(),
        on_path: vec![false; out.len()],
        found: Vec::new(),
    };
    for start in 0..out.len() {
        s.path = vec![start];
        s.on_path[start] = true;
        s.visit(start, start);
        s.on_path[start] = false;
    }
    s.found
}

/// Grows a chain from edge a->b, forward then backward, along the heaviest edge to a node not
/// yet on it, while that raises N*(L-1), the crossings a multi-call of the chain would save.
///
/// N here is a first-order estimate, not the min-edge bound: a step x->y keeps the share
/// w(x,y)/out(x) of the occurrences (backward, w(p,x)/calls(x)). With the bound, chains would
/// splice at shared nodes: openat->read->close and statx->read->fsync would make
/// statx->read->close, which never ran.
fn grow_chain(adj: &Adjacency, (a, b, w): (usize, usize, u64), max_len: usize) -> Vec<usize> {
    let mut chain = std::collections::VecDeque::from([a, b]);
    let mut estimate = w as f64;
    for forward in [true, false] {
        while chain.len() < max_len {
            let (edges, total) = if forward {
                let end = chain[chain.len() - 1];
                (&adj.out[end], adj.out_total[end])
            } else {
                (&adj.inn[chain[0]], adj.in_total[chain[0]])
            };
            let Some(&(next, w)) = edges.iter().find(|(x, _)| !chain.contains(x)) else {
                break;
            };
            let len = chain.len() as f64;
            let next_estimate = estimate * w as f64 / total.max(1) as f64;
            if next_estimate * len <= estimate * (len - 1.0) {
                break;
            }
            estimate = next_estimate;
            if forward {
                chain.push_back(next);
            } else {
                chain.push_front(next);
            }
        }
    }
    chain.into()
}

/// The sampled stacks of the calls on `edges`, merged by (syscall, frames), top `limit`.
fn sites(g: &Graph, edges: &[(usize, usize)], limit: usize) -> Vec<Site> {
    let mut merged: BTreeMap<(String, &[Frame]), u64> = BTreeMap::new();
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
