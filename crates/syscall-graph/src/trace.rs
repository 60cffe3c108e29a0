//! Builds a thread's transitions from a syscall trace, one call at a time: the paper's
//! GraphBuilder (figure 4) in user space, extended with the call before the previous one
//! (`Transition::before`), for tests and for traces read from elsewhere.

use std::collections::HashMap;

use crate::model::{CallSite, CallSiteFrame, Node, Thread, Transition};

/// Feeds calls in the order they returned; `finish` gives the thread's transitions.
#[derive(Debug)]
pub struct TraceBuilder {
    thread: Thread,
    /// The last two calls, older first.
    prev: (Option<Node>, Option<Node>),
    index: HashMap<(Option<Node>, Option<Node>, Node), usize>,
}

impl TraceBuilder {
    pub fn new(pid: u32, tid: u32, comm: impl Into<String>) -> TraceBuilder {
        TraceBuilder {
            thread: Thread {
                pid,
                tid,
                comm: comm.into(),
                transitions: Vec::new(),
            },
            prev: (None, None),
            index: HashMap::new(),
        }
    }

    /// One call of `node` that took `ns` and failed if `error`, with its user stack if sampled.
    pub fn call(
        &mut self,
        node: &Node,
        error: bool,
        ns: u64,
        stack: Option<&[CallSiteFrame]>,
    ) -> &mut Self {
        let (before, from) = std::mem::take(&mut self.prev);
        let key = (before, from, node.clone());
        let next = (key.1.clone(), Some(node.clone()));
        let transitions = &mut self.thread.transitions;
        let i = *self.index.entry(key.clone()).or_insert_with(|| {
            transitions.push(Transition {
                before: key.0,
                from: key.1,
                to: key.2,
                count: 0,
                errors: 0,
                total_ns: 0,
                sites: Vec::new(),
            });
            transitions.len() - 1
        });
        let t = &mut transitions[i];
        t.count += 1;
        t.errors += u64::from(error);
        t.total_ns += ns;
        if let Some(frames) = stack {
            match t.sites.iter_mut().find(|s| s.frames == frames) {
                Some(site) => site.count += 1,
                None => t.sites.push(CallSite {
                    frames: frames.to_vec(),
                    count: 1,
                }),
            }
        }
        self.prev = next;
        self
    }

    /// `n` successful calls of `node`, `ns` each, with the same stack.
    pub fn repeat(
        &mut self,
        node: &Node,
        n: usize,
        ns: u64,
        stack: Option<&[CallSiteFrame]>,
    ) -> &mut Self {
        for _ in 0..n {
            self.call(node, false, ns, stack);
        }
        self
    }

    pub fn finish(self) -> Thread {
        self.thread
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_triple_once_per_occurrence() {
        let (a, b) = (Node::new(0, "read"), Node::new(1, "write"));
        let mut t = TraceBuilder::new(1, 1, "t");
        t.call(&a, false, 10, None)
            .call(&b, true, 20, None)
            .call(&a, false, 10, None)
            .call(&b, false, 30, None);
        let th = t.finish();
        let find = |before: Option<&Node>, from: Option<&Node>, to: &Node| {
            th.transitions
                .iter()
                .find(|t| t.before.as_ref() == before && t.from.as_ref() == from && &t.to == to)
                .map(|t| (t.count, t.errors, t.total_ns))
        };
        // Summed over `before`, the pairs: (none, a) once, a->b twice (one error), b->a once.
        let pair = |from: Option<&Node>, to: &Node| {
            th.transitions
                .iter()
                .filter(|t| t.from.as_ref() == from && &t.to == to)
                .fold((0, 0, 0), |s, t| {
                    (s.0 + t.count, s.1 + t.errors, s.2 + t.total_ns)
                })
        };
        assert_eq!(th.transitions.len(), 4);
        assert_eq!(find(None, None, &a), Some((1, 0, 10)));
        // The second call has no call before its predecessor.
        assert_eq!(find(None, Some(&a), &b), Some((1, 1, 20)));
        assert_eq!(find(Some(&a), Some(&b), &a), Some((1, 0, 10)));
        assert_eq!(find(Some(&b), Some(&a), &b), Some((1, 0, 30)));
        assert_eq!(pair(None, &a), (1, 0, 10));
        assert_eq!(pair(Some(&a), &b), (2, 1, 50));
        assert_eq!(pair(Some(&b), &a), (1, 0, 10));
    }
}
