//! Candidate search in one thread's graph: simple cycles (bounded depth-first search) and chains
//! grown from the heaviest edges. With trigram data both only take a step whose trigram with the
//! two calls before it ran at least `min_count` times, so no path is spliced from pieces that
//! never ran one after the other.

use std::collections::{HashMap, VecDeque};

use crate::graph::Graph;

/// Out-edges followed per node when looking for loops and chains (heaviest first).
pub(super) const FANOUT: usize = 12;
/// Search steps per thread when enumerating loops.
const CYCLE_BUDGET: usize = 200_000;

/// Edges of weight >= min_count between distinct nodes, heaviest first (`FANOUT` per node), and
/// all weight out of and into each node.
pub(super) struct Adjacency {
    pub out: Vec<Vec<(usize, u64)>>,
    pub inn: Vec<Vec<(usize, u64)>>,
    pub out_total: Vec<u64>,
    pub in_total: Vec<u64>,
}

/// Trigrams that ran at least min_count times, by their first two and by their last two calls:
/// (a, b) -> [(c, count)] and (b, c) -> [(a, count)], most frequent first. Steps onto the same
/// node (self-loops) are left out: paths have distinct nodes.
pub(super) struct Continuations {
    next: HashMap<(usize, usize), Vec<(usize, u64)>>,
    prev: HashMap<(usize, usize), Vec<(usize, u64)>>,
}

impl Continuations {
    pub fn new(g: &Graph, min: u64) -> Continuations {
        let mut c = Continuations {
            next: HashMap::new(),
            prev: HashMap::new(),
        };
        for ((a, b, z), n) in g.trigrams() {
            if n >= min && a != b && b != z {
                c.next.entry((a, b)).or_default().push((z, n));
                c.prev.entry((b, z)).or_default().push((a, n));
            }
        }
        for list in c.next.values_mut().chain(c.prev.values_mut()) {
            list.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        }
        c
    }
}

/// Simple cycles of 2..=max_len nodes, each listed once, starting at its smallest node index.
///
/// With `trigrams` (the graph and min_count), at most one of a cycle's wrapped trigrams may have
/// run fewer than min_count times: the one a loop's count leaves out (see the module docs of
/// `clusters`); a second one prunes the search.
pub(super) fn cycles(
    out: &[Vec<(usize, u64)>],
    max_len: usize,
    trigrams: Option<(&Graph, u64)>,
) -> Vec<Vec<usize>> {
    struct Search<'a> {
        out: &'a [Vec<(usize, u64)>],
        max_len: usize,
        trigrams: Option<(&'a Graph, u64)>,
        budget: usize,
        path: Vec<usize>,
        on_path: Vec<bool>,
        /// Weak trigrams (fewer than min_count) on the path so far.
        weak: usize,
        found: Vec<Vec<usize>>,
    }
    impl Search<'_> {
        fn weak(&self, a: usize, b: usize, c: usize) -> usize {
            self.trigrams
                .map_or(0, |(g, min)| usize::from(g.trigram(a, b, c) < min))
        }

        fn visit(&mut self, start: usize, v: usize) {
            let out = self.out;
            for &(u, _) in &out[v] {
                if self.budget == 0 {
                    return;
                }
                self.budget -= 1;
                let n = self.path.len();
                // The node before v; the search starts with the path [start], v == start.
                let x = (n >= 2).then(|| self.path[n - 2]);
                if u == start {
                    let weak = x.map_or(0, |x| {
                        self.weak(x, v, start) + self.weak(v, start, self.path[1])
                    });
                    if self.weak + weak <= 1 {
                        self.found.push(self.path.clone());
                    }
                } else if u > start && !self.on_path[u] && n < self.max_len {
                    let weak = x.map_or(0, |x| self.weak(x, v, u));
                    if self.weak + weak > 1 {
                        continue;
                    }
                    self.weak += weak;
                    self.path.push(u);
                    self.on_path[u] = true;
                    self.visit(start, u);
                    self.on_path[u] = false;
                    self.path.pop();
                    self.weak -= weak;
                }
            }
        }
    }
    let mut s = Search {
        out,
        max_len,
        trigrams,
        budget: CYCLE_BUDGET,
        path: Vec::new(),
        on_path: vec![false; out.len()],
        weak: 0,
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

/// Grows a chain from edge a->b, forward then backward, one node not yet on it at a time, while
/// that raises N*(L-1), the crossings a multi-call of the chain would save.
///
/// With trigram data (`next` given), a step must continue a trigram with the chain's last (first)
/// two calls that ran at least min_count times, the most frequent one is taken, and N is the
/// smallest trigram count on the chain (the chain's count, see `count`).
///
/// Without, a step takes the heaviest edge and N is a first-order estimate, not the min-edge
/// bound: a step x->y keeps the share w(x,y)/out(x) of the occurrences (backward,
/// w(p,x)/calls(x)). With the bound, chains would splice at shared nodes: openat->read->close
/// and statx->read->fsync would make statx->read->close, which never ran.
pub(super) fn grow_chain(
    adj: &Adjacency,
    next: Option<&Continuations>,
    (a, b, w): (usize, usize, u64),
    max_len: usize,
) -> Vec<usize> {
    let mut chain = VecDeque::from([a, b]);
    let mut estimate = w as f64;
    for forward in [true, false] {
        while chain.len() < max_len {
            let step = match next {
                Some(c) => {
                    let (list, key) = if forward {
                        (&c.next, (chain[chain.len() - 2], chain[chain.len() - 1]))
                    } else {
                        (&c.prev, (chain[0], chain[1]))
                    };
                    list.get(&key)
                        .and_then(|l| l.iter().find(|(x, _)| !chain.contains(x)))
                        .map(|&(x, n)| (x, estimate.min(n as f64)))
                }
                None => {
                    let (edges, total) = if forward {
                        let end = chain[chain.len() - 1];
                        (&adj.out[end], adj.out_total[end])
                    } else {
                        (&adj.inn[chain[0]], adj.in_total[chain[0]])
                    };
                    edges
                        .iter()
                        .find(|(x, _)| !chain.contains(x))
                        .map(|&(x, w)| (x, estimate * w as f64 / total.max(1) as f64))
                }
            };
            let Some((node, next_estimate)) = step else {
                break;
            };
            let len = chain.len() as f64;
            if next_estimate * len <= estimate * (len - 1.0) {
                break;
            }
            estimate = next_estimate;
            if forward {
                chain.push_back(node);
            } else {
                chain.push_front(node);
            }
        }
    }
    chain.into()
}
