//! The syscall graph: nodes are syscalls (split by argument with `--args`) with their calls,
//! errors and time; a weighted edge A->B counts how often B ran right after A. Built for one
//! thread from its transitions, and merged for a process or the whole profile. A thread's graph
//! also keeps its trigram counts (A, B, C: C ran right after B, which ran right after A) for the
//! cluster counts; every edge and node figure is a sum over them, exactly as without. Merged and
//! by-name graphs, which no cluster is found in, keep none.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use serde::Serialize;

use crate::model::{CallSite, CallSiteFrame, Node, Transition};

/// A syscall node and what ran of it: calls(B) = sum of the counts of all edges into B,
/// including the edge from "no previous call"; errors and time likewise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeStats {
    pub node: Node,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
}

/// `to` ran right after `from` (None: `to` was a thread's first call) `count` times; errors and
/// time are those of `to` on this edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// Index into `Graph::nodes`, None for "no previous call".
    pub from: Option<usize>,
    pub to: usize,
    pub count: u64,
    pub errors: u64,
    pub total_ns: u64,
    /// Sampled user stacks of `to` on this edge, most frequent first.
    pub sites: Vec<CallSite>,
}

/// Nodes sorted by calls (most first, then by node); edges by count (most first, then by
/// indices).
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub nodes: Vec<NodeStats>,
    pub edges: Vec<Edge>,
    node_index: FastMap<Node, usize>,
    edge_index: FastMap<(Option<usize>, usize), usize>,
    trigrams: FastMap<(usize, usize, usize), u64>,
    has_trigrams: bool,
}

type FastMap<K, V> = HashMap<K, V, RandomState>;

#[derive(Default)]
struct EdgeAcc {
    count: u64,
    errors: u64,
    total_ns: u64,
    sites: FastMap<Vec<CallSiteFrame>, u64>,
}

/// Accumulates edges between interned nodes, then numbers the nodes by calls.
#[derive(Default)]
struct Builder {
    ids: FastMap<Node, usize>,
    nodes: Vec<NodeStats>,
    edges: FastMap<(Option<usize>, usize), EdgeAcc>,
    trigrams: FastMap<(usize, usize, usize), u64>,
    has_trigrams: bool,
}

impl Builder {
    fn id(&mut self, node: &Node) -> usize {
        if let Some(&id) = self.ids.get(node) {
            return id;
        }
        self.nodes.push(NodeStats::zero(node));
        self.ids.insert(node.clone(), self.nodes.len() - 1);
        self.nodes.len() - 1
    }

    /// Adds one transition's edge; returns the ids of `from` and `to`.
    fn add(
        &mut self,
        from: Option<&Node>,
        to: &Node,
        (count, errors, total_ns): (u64, u64, u64),
        sites: &[CallSite],
    ) -> (Option<usize>, usize) {
        let from = from.map(|f| self.id(f));
        let to = self.id(to);
        self.add_ids(from, to, (count, errors, total_ns), sites);
        (from, to)
    }

    fn add_ids(
        &mut self,
        from: Option<usize>,
        to: usize,
        (count, errors, total_ns): (u64, u64, u64),
        sites: &[CallSite],
    ) {
        let stats = &mut self.nodes[to];
        stats.calls += count;
        stats.errors += errors;
        stats.total_ns += total_ns;
        let acc = self.edges.entry((from, to)).or_default();
        acc.count += count;
        acc.errors += errors;
        acc.total_ns += total_ns;
        for s in sites {
            match acc.sites.get_mut(&s.frames) {
                Some(n) => *n += s.count,
                None => {
                    acc.sites.insert(s.frames.clone(), s.count);
                }
            }
        }
    }

    fn finish(self) -> Graph {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&self.nodes[a], &self.nodes[b]);
            b.calls.cmp(&a.calls).then_with(|| a.node.cmp(&b.node))
        });
        let mut rank = vec![0; order.len()];
        for (i, &id) in order.iter().enumerate() {
            rank[id] = i;
        }
        let mut slots: Vec<Option<NodeStats>> = self.nodes.into_iter().map(Some).collect();
        let nodes: Vec<NodeStats> = order
            .iter()
            .map(|&id| slots[id].take().expect("each node once"))
            .collect();
        let node_index: FastMap<Node, usize> = self
            .ids
            .into_iter()
            .map(|(node, id)| (node, rank[id]))
            .collect();
        let mut edges: Vec<Edge> = self
            .edges
            .into_iter()
            .map(|((from, to), acc)| {
                let mut sites: Vec<CallSite> = acc
                    .sites
                    .into_iter()
                    .map(|(frames, count)| CallSite { frames, count })
                    .collect();
                sites.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.frames.cmp(&b.frames)));
                Edge {
                    from: from.map(|f| rank[f]),
                    to: rank[to],
                    count: acc.count,
                    errors: acc.errors,
                    total_ns: acc.total_ns,
                    sites,
                }
            })
            .collect();
        edges.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| (a.from, a.to).cmp(&(b.from, b.to)))
        });
        let edge_index = edges
            .iter()
            .enumerate()
            .map(|(i, e)| ((e.from, e.to), i))
            .collect();
        let trigrams = self
            .trigrams
            .into_iter()
            .map(|((a, b, c), n)| ((rank[a], rank[b], rank[c]), n))
            .collect();
        Graph {
            nodes,
            edges,
            node_index,
            edge_index,
            trigrams,
            has_trigrams: self.has_trigrams,
        }
    }
}

impl NodeStats {
    fn zero(node: &Node) -> NodeStats {
        NodeStats {
            node: node.clone(),
            calls: 0,
            errors: 0,
            total_ns: 0,
        }
    }
}

impl Graph {
    /// One thread's graph. Repeated (from, to) pairs are summed over `before`; transitions with
    /// `before` and `from` set are also counted as trigrams. A trigram whose `before` is no node
    /// of the graph (its own transitions were lost) is dropped rather than adding a node.
    ///
    /// Every run of a trigram (a, b, c) is also a run of the edge a -> b: the input need not say
    /// so when the collector lost that edge's transitions (a full table) or read the table while
    /// the thread was still filling it (`syscalls -a` reads every thread's entries one after the
    /// other, so a later transition may be read and an earlier one not). A trigram counts at most
    /// the weight of its edge a -> b: without that edge it is dropped, so that no path is counted
    /// over a step the graph does not have.
    pub fn from_transitions<'a>(transitions: impl IntoIterator<Item = &'a Transition>) -> Graph {
        let mut b = Builder::default();
        // (before, from, to, count): `before` is looked up once every node is known.
        let mut triples: Vec<(&Node, usize, usize, u64)> = Vec::new();
        for t in transitions {
            let ids = b.add(
                t.from.as_ref(),
                &t.to,
                (t.count, t.errors, t.total_ns),
                &t.sites,
            );
            if let (Some(before), (Some(from), to)) = (&t.before, ids) {
                triples.push((before, from, to, t.count));
            }
        }
        b.has_trigrams = !triples.is_empty();
        for (before, from, to, n) in triples {
            if let Some(&a) = b.ids.get(before) {
                *b.trigrams.entry((a, from, to)).or_default() += n;
            }
        }
        let edges = &b.edges;
        b.trigrams.retain(|&(a, from, _), n| {
            *n = (*n).min(edges.get(&(Some(a), from)).map_or(0, |e| e.count));
            *n > 0
        });
        b.finish()
    }

    /// Several graphs (threads of a process, processes of a profile) as one: edges between
    /// equal nodes are summed, call sites merged.
    pub fn merge<'a>(graphs: impl IntoIterator<Item = &'a Graph>) -> Graph {
        let mut b = Builder::default();
        for g in graphs {
            Self::add_to(
                &mut b,
                g,
                &g.nodes.iter().map(|n| n.node.clone()).collect::<Vec<_>>(),
            );
        }
        b.finish()
    }

    /// The graph with argument splits removed: one node per syscall, as `strace -c` counts.
    pub fn by_name(&self) -> Graph {
        let mut b = Builder::default();
        let keys: Vec<Node> = self.nodes.iter().map(|n| n.node.without_arg()).collect();
        Self::add_to(&mut b, self, &keys);
        b.finish()
    }

    /// Adds `g`'s edges (not its trigrams) with node i renamed to `keys[i]`.
    fn add_to(b: &mut Builder, g: &Graph, keys: &[Node]) {
        let ids: Vec<usize> = keys.iter().map(|k| b.id(k)).collect();
        for e in &g.edges {
            let (from, to) = (e.from.map(|f| ids[f]), ids[e.to]);
            b.add_ids(from, to, (e.count, e.errors, e.total_ns), &e.sites);
        }
    }

    pub fn calls(&self) -> u64 {
        self.nodes.iter().map(|n| n.calls).sum()
    }

    pub fn errors(&self) -> u64 {
        self.nodes.iter().map(|n| n.errors).sum()
    }

    pub fn total_ns(&self) -> u64 {
        self.nodes.iter().map(|n| n.total_ns).sum()
    }

    pub fn index_of(&self, node: &Node) -> Option<usize> {
        self.node_index.get(node).copied()
    }

    /// The edge from node `from` to node `to` (indices), if B ever followed A.
    pub fn edge(&self, from: Option<usize>, to: usize) -> Option<&Edge> {
        self.edge_index.get(&(from, to)).map(|&i| &self.edges[i])
    }

    /// The weight of edge `from` -> `to`, 0 when there is none.
    pub fn weight(&self, from: usize, to: usize) -> u64 {
        self.edge(Some(from), to).map_or(0, |e| e.count)
    }

    /// Times `c` ran right after `b`, which ran right after `a` (node indices); 0 when never or
    /// when the graph has no trigram data.
    pub fn trigram(&self, a: usize, b: usize, c: usize) -> u64 {
        self.trigrams.get(&(a, b, c)).copied().unwrap_or(0)
    }

    /// Every non-zero trigram count, ((a, b, c), count), in no particular order.
    pub fn trigrams(&self) -> impl Iterator<Item = ((usize, usize, usize), u64)> + '_ {
        self.trigrams.iter().map(|(&k, &n)| (k, n))
    }

    /// Whether the transitions carried trigram data: any of them had `before` set (false for
    /// merged and by-name graphs). Without it (an older collector) path counts fall back to
    /// edge weights.
    pub fn has_trigrams(&self) -> bool {
        self.has_trigrams
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceBuilder;

    fn n(name: &str) -> Node {
        Node::new(0, name)
    }

    /// openat read write read write read close: read 3 calls (1 from openat, 2 from write).
    fn copy_graph() -> Graph {
        let mut t = TraceBuilder::new(1, 1, "cp");
        t.call(&n("openat"), false, 5, None);
        for _ in 0..2 {
            t.call(&n("read"), false, 10, None)
                .call(&n("write"), true, 20, None);
        }
        t.call(&n("read"), false, 1, None)
            .call(&n("close"), false, 2, None);
        Graph::from_transitions(&t.finish().transitions)
    }

    #[test]
    fn node_stats_are_sums_of_in_edges() {
        let g = copy_graph();
        let names: Vec<(&str, u64, u64, u64)> = g
            .nodes
            .iter()
            .map(|s| (s.node.name.as_str(), s.calls, s.errors, s.total_ns))
            .collect();
        assert_eq!(
            names,
            [
                ("read", 3, 0, 21),
                ("write", 2, 2, 40),
                ("close", 1, 0, 2),
                ("openat", 1, 0, 5)
            ]
        );
        assert_eq!((g.calls(), g.errors(), g.total_ns()), (7, 2, 68));
        let (r, w, c) = (
            g.index_of(&n("read")).unwrap(),
            g.index_of(&n("write")).unwrap(),
            g.index_of(&n("close")).unwrap(),
        );
        assert_eq!(g.weight(r, w), 2);
        assert_eq!(g.weight(w, r), 2);
        assert_eq!(g.weight(r, c), 1);
        assert_eq!(g.weight(w, c), 0);
        assert_eq!(
            g.edge(None, g.index_of(&n("openat")).unwrap())
                .unwrap()
                .count,
            1
        );
        // Heaviest edges first.
        assert_eq!(g.edges[0].count, 2);
    }

    #[test]
    fn merge_sums_equal_edges() {
        let g = copy_graph();
        let m = Graph::merge([&g, &g]);
        assert_eq!(m.calls(), 14);
        let (r, w) = (
            m.index_of(&n("read")).unwrap(),
            m.index_of(&n("write")).unwrap(),
        );
        assert_eq!(m.weight(r, w), 4);
        assert_eq!(m.edges.len(), g.edges.len());
    }

    #[test]
    fn by_name_collapses_argument_splits() {
        let mut t = TraceBuilder::new(1, 1, "t");
        let r3 = n("read").with_arg(Some(3), Some(12));
        let r4 = n("read").with_arg(Some(4), Some(12));
        t.call(&r3, false, 1, None)
            .call(&r4, false, 1, None)
            .call(&r3, true, 1, None);
        let g = Graph::from_transitions(&t.finish().transitions);
        assert_eq!(g.nodes.len(), 2);
        let b = g.by_name();
        assert_eq!(b.nodes.len(), 1);
        assert_eq!((b.nodes[0].calls, b.nodes[0].errors), (3, 1));
        assert_eq!(b.weight(0, 0), 2);
    }

    #[test]
    fn node_only_seen_as_predecessor_has_zero_calls() {
        let t = Transition {
            before: None,
            from: Some(n("lost")),
            to: n("read"),
            count: 4,
            errors: 0,
            total_ns: 0,
            sites: vec![],
        };
        let g = Graph::from_transitions([&t]);
        let lost = g.index_of(&n("lost")).unwrap();
        assert_eq!(g.nodes[lost].calls, 0);
        assert_eq!(g.calls(), 4);
    }
}
