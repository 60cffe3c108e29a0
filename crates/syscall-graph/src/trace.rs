//! Builds a thread's transitions from a syscall trace, one call at a time: the paper's
//! GraphBuilder (figure 4) in user space, for tests and for traces read from elsewhere.

use std::collections::HashMap;

use crate::model::{CallSite, Frame, Node, Thread, Transition};

/// Feeds calls in the order they returned; `finish` gives the thread's transitions.
#[derive(Debug)]
pub struct TraceBuilder {
    thread: Thread,
    prev: Option<Node>,
    index: HashMap<(Option<Node>, Node), usize>,
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
            prev: None,
            index: HashMap::new(),
        }
    }

    /// One call of `node` that took `ns` and failed if `error`, with its user stack if sampled.
    pub fn call(
        &mut self,
        node: &Node,
        error: bool,
        ns: u64,
        stack: Option<&[Frame]>,
    ) -> &mut Self {
        let key = (self.prev.take(), node.clone());
        let transitions = &mut self.thread.transitions;
        let i = *self.index.entry(key.clone()).or_insert_with(|| {
            transitions.push(Transition {
                from: key.0,
                to: key.1,
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
        self.prev = Some(node.clone());
        self
    }

    /// `n` successful calls of `node`, `ns` each, with the same stack.
    pub fn repeat(&mut self, node: &Node, n: usize, ns: u64, stack: Option<&[Frame]>) -> &mut Self {
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
    fn counts_each_pair_once_per_occurrence() {
        let (a, b) = (Node::new(0, "read"), Node::new(1, "write"));
        let mut t = TraceBuilder::new(1, 1, "t");
        t.call(&a, false, 10, None)
            .call(&b, true, 20, None)
            .call(&a, false, 10, None)
            .call(&b, false, 30, None);
        let th = t.finish();
        let find = |from: Option<&Node>, to: &Node| {
            th.transitions
                .iter()
                .find(|t| t.from.as_ref() == from && &t.to == to)
                .map(|t| (t.count, t.errors, t.total_ns))
        };
        assert_eq!(th.transitions.len(), 3);
        assert_eq!(find(None, &a), Some((1, 0, 10)));
        assert_eq!(find(Some(&a), &b), Some((2, 1, 50)));
        assert_eq!(find(Some(&b), &a), Some((1, 0, 10)));
    }
}
