//! Counting candidates: which edges and trigrams bound a path's count, how a loop is rotated, and
//! the greedy choice that shares edges and trigrams between overlapping clusters (the rules are
//! in the module docs of `clusters`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::graph::Graph;
use crate::model::Node;
use crate::suggest::{self, Kind, Shape};

/// A path or loop that may become a cluster.
pub(super) struct Candidate {
    pub shape: Shape,
    /// Node indices; a loop rotated as `rotate_loop` says.
    pub nodes: Vec<usize>,
    /// The edges it covers (a loop's closing edge included).
    pub edges: Vec<(usize, usize)>,
    /// The trigrams its count is the smallest of, besides its edges (empty without trigram
    /// data): a chain's L-2 consecutive ones, a loop's L-1 of the closed walk p0 -> ... -> p0.
    pub triples: Vec<(usize, usize, usize)>,
    /// Its count on the whole graph is exactly the times it ran (not an upper bound).
    pub exact: bool,
    pub plan: suggest::Plan,
}

/// What is left of each edge and trigram once the clusters taken so far have used theirs.
#[derive(Clone)]
pub(super) struct Residual {
    edges: HashMap<(usize, usize), u64>,
    triples: HashMap<(usize, usize, usize), u64>,
}

/// Positions (from, to) of the edges of a path of `len` nodes with `shape`.
pub(super) fn edge_pairs(shape: Shape, len: usize) -> Vec<(usize, usize)> {
    match shape {
        Shape::SelfLoop => vec![(0, 0)],
        Shape::Loop => (0..len).map(|i| (i, (i + 1) % len)).collect(),
        Shape::Chain => (1..len).map(|i| (i - 1, i)).collect(),
    }
}

/// Rotates a loop so that it starts at position s minimising (with trigrams) the count of the
/// wrapped trigram (p[s-1], p[s], p[s+1]) that its count leaves out, which maximises the count;
/// then after the lightest edge p[s-1] -> p[s], usually the one taken once fewer per loop
/// instance (write->read in read -> write -> read ... read): poll -> recvfrom -> sendto rather
/// than sendto -> poll -> recvfrom; then at the busiest node.
fn rotate_loop(g: &Graph, trigrams: bool, nodes: &mut [usize]) {
    let len = nodes.len();
    let at = |i: usize| nodes[i % len];
    let start = (0..len)
        .min_by_key(|&s| {
            let (before, first, second) = (at(s + len - 1), at(s), at(s + 1));
            let left_out = if trigrams {
                g.trigram(before, first, second)
            } else {
                0
            };
            (left_out, g.weight(before, first), first)
        })
        .unwrap_or(0);
    nodes.rotate_left(start);
}

impl Candidate {
    /// `trigrams`: the graph has trigram data, and counts use it.
    pub fn new(g: &Graph, trigrams: bool, shape: Shape, mut nodes: Vec<usize>) -> Candidate {
        if shape == Shape::Loop {
            rotate_loop(g, trigrams, &mut nodes);
        }
        let len = nodes.len();
        let path: Vec<Node> = nodes.iter().map(|&i| g.nodes[i].node.clone()).collect();
        let edges = edge_pairs(shape, len)
            .into_iter()
            .map(|(a, b)| (nodes[a], nodes[b]))
            .collect();
        let at = |i: usize| nodes[i % len];
        let triples: Vec<(usize, usize, usize)> = match shape {
            _ if !trigrams => Vec::new(),
            Shape::SelfLoop => Vec::new(),
            Shape::Chain => (0..len.saturating_sub(2))
                .map(|i| (at(i), at(i + 1), at(i + 2)))
                .collect(),
            Shape::Loop => (0..len - 1)
                .map(|i| (at(i), at(i + 1), at(i + 2)))
                .collect(),
        };
        let exact = match shape {
            Shape::SelfLoop => true,
            Shape::Chain => len == 2 || (trigrams && len == 3),
            Shape::Loop => trigrams && len == 2,
        };
        Candidate {
            plan: suggest::plan(shape, &path),
            shape,
            nodes,
            edges,
            triples,
            exact,
        }
    }

    /// Ordering key on what is left: crossings saved, then actionable, then loops before chains,
    /// then count, then longer first.
    fn key(&self, residual: &Residual) -> (u64, bool, bool, u64, usize) {
        let count = residual.count(self);
        (
            count * self.plan.saved_per_count,
            self.plan.suggestion.kind != Kind::None,
            self.shape != Shape::Chain,
            count,
            self.nodes.len(),
        )
    }
}

impl Residual {
    /// Every edge of `g` (but those from "no previous call") and every trigram of `candidates`
    /// at its full count.
    pub fn new(g: &Graph, candidates: &[Candidate]) -> Residual {
        let edges = g
            .edges
            .iter()
            .filter_map(|e| Some(((e.from?, e.to), e.count)))
            .collect();
        let triples = candidates
            .iter()
            .flat_map(|c| &c.triples)
            .map(|&(a, b, c)| ((a, b, c), g.trigram(a, b, c)))
            .collect();
        Residual { edges, triples }
    }

    /// The smallest of what is left on the candidate's edges and trigrams; 0 if one of them is
    /// not in the graph (the graph does not let a search step onto a missing edge, but a count
    /// must not rely on the search for that).
    fn count(&self, c: &Candidate) -> u64 {
        let edges = c.edges.iter().map(|e| self.edges.get(e).copied());
        let triples = c.triples.iter().map(|t| self.triples.get(t).copied());
        edges
            .chain(triples)
            .map(|n| n.unwrap_or(0))
            .min()
            .unwrap_or(0)
    }

    /// Uses `n` of every edge and trigram of the candidate; `n` is at most `count(c)`, so
    /// nothing goes below 0 (and with `n` > 0 every one of them is there).
    fn take(&mut self, c: &Candidate, n: u64) {
        for e in &c.edges {
            if let Some(left) = self.edges.get_mut(e) {
                *left = left.saturating_sub(n);
            }
        }
        for t in &c.triples {
            if let Some(left) = self.triples.get_mut(t) {
                *left = left.saturating_sub(n);
            }
        }
    }
}

/// A candidate taken as a cluster: its count, crossings saved, and whether the count is exact.
pub(super) struct Taken<'a> {
    pub candidate: &'a Candidate,
    pub count: u64,
    pub saved: u64,
    pub exact: bool,
}

/// Takes candidates best first, each using up its count on every edge and trigram it covers,
/// while their count on what is left is at least `min`. A taken count is exact when the
/// candidate's is and no cluster taken before used any of it.
pub(super) fn take_greedily(
    candidates: &[Candidate],
    mut residual: Residual,
    min: u64,
) -> Vec<Taken<'_>> {
    let full: Vec<u64> = candidates.iter().map(|c| residual.count(c)).collect();
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
        residual.take(c, now.3);
        taken.push(Taken {
            candidate: c,
            count: now.3,
            saved: now.0,
            exact: c.exact && now.3 == full[i],
        });
    }
    taken
}
