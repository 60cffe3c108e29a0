//! Profile-directed system call clustering (Rajagopalan et al., "System Call Clustering: A
//! Profile-Directed Optimization Technique"): from per-thread counts of "syscall A immediately
//! followed by syscall B" (split by the call before A, so that paths of three calls are counted,
//! not guessed), the syscall graph, its frequent loops and paths ranked by the kernel crossings a
//! replacement saves, and a suggestion for each (a single Linux call, epoll, or a batch through
//! pkprof's multi-call library), with text, Graphviz and JSON reports.
//!
//! ```
//! use pkprof_syscall_graph::{render, Analysis, Node, Options, SyscallProfile, TraceBuilder};
//!
//! let (read, write) = (Node::new(0, "read"), Node::new(1, "write"));
//! let mut t = TraceBuilder::new(42, 42, "cp");
//! for _ in 0..100 {
//!     t.call(&read, false, 1_000, None).call(&write, false, 2_000, None);
//! }
//! let profile = SyscallProfile { target: "pid 42".into(), threads: vec![t.finish()], ..SyscallProfile::default() };
//! let analysis = Analysis::new(&profile, &Options::default());
//! assert_eq!(analysis.clusters[0].suggestion.replacement.as_deref(),
//!            Some("copy_file_range / sendfile / splice"));
//! let mut out = Vec::new();
//! render::text::write(&analysis, &mut out).unwrap();
//! ```

pub mod clusters;
pub mod costs;
pub mod graph;
pub mod model;
pub mod render;
pub mod suggest;
pub mod trace;

use std::collections::BTreeMap;

pub use clusters::{Cluster, ClusterGroup, Site};
pub use costs::{Alternative, CostTable, Costs, Estimate, Saving};
pub use graph::{Edge, Graph, NodeStats};
pub use model::{Arg, CallSite, CallSiteFrame, Lost, Node, SyscallProfile, Thread, Transition};
pub use suggest::{Kind, Shape, Suggestion, MULTICALL_OPS};
pub use trace::TraceBuilder;

/// What the analysis looks for and how much the reports show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Clusters listed, and heaviest edges listed by the text report.
    pub top: usize,
    /// A cluster must have occurred at least this many times.
    pub min_count: u64,
    /// Most calls in a chain or in one loop iteration.
    pub max_len: usize,
    /// Call sites kept per cluster.
    pub sites: usize,
    /// Frames per call site printed by the text report.
    pub frames: usize,
    /// Processes given their own syscall table in the text report (busiest first).
    pub processes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            top: 10,
            min_count: 2,
            max_len: 6,
            sites: 3,
            frames: 4,
            processes: 10,
        }
    }
}

/// Errors of the report writers. The message includes the cause, so `source()` does not return
/// it too (a chain printer would say it twice): hence the hand-written `From`s, not `#[from]`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing the syscall report: {0}")]
    Io(std::io::Error),
    #[error("encoding the syscall report as JSON: {0}")]
    Json(serde_json::Error),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Json(e)
    }
}

/// One thread's syscall graph.
#[derive(Debug, Clone)]
pub struct ThreadGraph {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub graph: Graph,
}

/// A process's threads merged into one graph.
#[derive(Debug, Clone)]
pub struct ProcessGraph {
    pub pid: u32,
    /// The main thread's comm (tid == pid), else the first thread's.
    pub comm: String,
    pub tids: Vec<u32>,
    pub graph: Graph,
}

/// Graphs and clusters of a profile, ready for the renderers.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub target: String,
    pub duration_ns: u64,
    pub args_split: bool,
    pub lost: Lost,
    pub options: Options,
    /// By pid, then tid. Thread entries with the same (pid, tid) are merged.
    pub threads: Vec<ThreadGraph>,
    /// Most calls first, then by pid.
    pub processes: Vec<ProcessGraph>,
    /// The whole profile as one graph.
    pub total: Graph,
    /// The whole profile by syscall name (no argument split): `strace -c`'s table.
    pub syscalls: Graph,
    /// Every cluster of every thread, best first (`rank` 1, 2, ...): the full list, one entry per
    /// thread; the reports list them grouped (`top_groups`).
    pub clusters: Vec<Cluster>,
    /// The cost table the advice was measured against (`with_costs`), if any.
    pub costs: Costs,
}

impl Analysis {
    pub fn new(profile: &SyscallProfile, options: &Options) -> Analysis {
        let mut by_thread: BTreeMap<(u32, u32), (&str, Vec<&Transition>)> = BTreeMap::new();
        for t in &profile.threads {
            let entry = by_thread
                .entry((t.pid, t.tid))
                .or_insert_with(|| (&t.comm, Vec::new()));
            entry.1.extend(&t.transitions);
        }
        let threads: Vec<ThreadGraph> = by_thread
            .into_iter()
            .map(|((pid, tid), (comm, transitions))| ThreadGraph {
                pid,
                tid,
                comm: comm.to_string(),
                graph: Graph::from_transitions(transitions),
            })
            .collect();

        let mut by_pid: BTreeMap<u32, Vec<&ThreadGraph>> = BTreeMap::new();
        for t in &threads {
            by_pid.entry(t.pid).or_default().push(t);
        }
        let mut processes: Vec<ProcessGraph> = by_pid
            .into_iter()
            .map(|(pid, ts)| ProcessGraph {
                pid,
                comm: ts
                    .iter()
                    .find(|t| t.tid == pid)
                    .unwrap_or(&ts[0])
                    .comm
                    .clone(),
                tids: ts.iter().map(|t| t.tid).collect(),
                graph: Graph::merge(ts.iter().map(|t| &t.graph)),
            })
            .collect();
        processes.sort_by(|a, b| {
            b.graph
                .calls()
                .cmp(&a.graph.calls())
                .then(a.pid.cmp(&b.pid))
        });
        let total = Graph::merge(processes.iter().map(|p| &p.graph));
        let syscalls = total.by_name();

        let mut clusters: Vec<Cluster> = threads
            .iter()
            .flat_map(|t| clusters::find(&t.graph, (t.pid, t.tid, &t.comm), options))
            .collect();
        clusters::rank(&mut clusters);

        Analysis {
            target: profile.target.clone(),
            duration_ns: profile.duration_ns,
            args_split: profile.args_split,
            lost: profile.lost.clone(),
            options: options.clone(),
            threads,
            processes,
            total,
            syscalls,
            clusters,
            costs: Costs::NotGiven,
        }
    }

    /// The advice measured against `costs` (see `costs`): with a table, each cluster's
    /// suggestion becomes the one expected to save the most time here (or `Kind::LeaveIt`) and
    /// carries its estimated saving; without one, the saving is unknown and the reports say how
    /// to measure it. Ranks (crossings saved) do not change.
    pub fn with_costs(mut self, costs: Costs) -> Analysis {
        for c in &mut self.clusters {
            let saving = match &costs {
                Costs::NotGiven => None,
                // The reason and the remedy are said once, above the clusters.
                Costs::Missing(_) => Some(Saving::Unknown {
                    why: "no cost table for this machine".into(),
                }),
                Costs::Table { table, .. } => {
                    let graph = self
                        .threads
                        .iter()
                        .find(|t| (t.pid, t.tid) == (c.pid, c.tid))
                        .map(|t| &t.graph);
                    // What the process's threads show (a pipe made by any of them).
                    let pipes = self.threads.iter().filter(|t| t.pid == c.pid).any(|t| {
                        t.graph.nodes.iter().any(|n| {
                            n.calls > 0 && costs::PIPE_CALLS.contains(&n.node.name.as_str())
                        })
                    });
                    let evidence = costs::Evidence { pipes };
                    graph.map(|g| {
                        let (suggestion, saving, alternatives) =
                            costs::advise(table, c, g, evidence);
                        c.suggestion = suggestion;
                        c.alternatives = alternatives;
                        saving
                    })
                }
            };
            c.saving = saving;
        }
        self.costs = costs;
        self
    }

    /// Per-thread clusters, best first: the first `options.top` and, when none of them is an
    /// epoll loop, the best epoll loop as well (it saves work per call, not crossings, so it
    /// ranks low; listed after the others, with its own rank). Nothing when `top` is 0. The
    /// reports list `top_groups` instead.
    pub fn top_clusters(&self) -> Vec<&Cluster> {
        let top = self.clusters.len().min(self.options.top);
        let mut listed: Vec<&Cluster> = self.clusters[..top].iter().collect();
        let is_epoll = |c: &&Cluster| c.suggestion.kind == Kind::Epoll;
        if top > 0 && !listed.iter().any(is_epoll) {
            listed.extend(self.clusters[top..].iter().find(is_epoll));
        }
        listed
    }

    /// Every cluster grouped across the threads and processes of one comm (same shape, path and
    /// suggestion; see `clusters::ClusterGroup`), ranked on the summed crossings saved. A profile
    /// whose clusters are all in different programs or on different paths has one group per
    /// cluster, in the same order and with the same ranks.
    pub fn cluster_groups(&self) -> Vec<ClusterGroup<'_>> {
        clusters::group(&self.clusters, self.options.sites)
    }

    /// The groups the reports list, best first: the first `options.top` and, when none of them
    /// is an epoll loop, the best epoll group as well (listed last, with its own rank). Nothing
    /// when `top` is 0.
    pub fn top_groups(&self) -> Vec<ClusterGroup<'_>> {
        let mut groups = self.cluster_groups();
        let top = groups.len().min(self.options.top);
        let is_epoll = |g: &ClusterGroup| g.first().suggestion.kind == Kind::Epoll;
        let epoll = if top > 0 && !groups[..top].iter().any(is_epoll) {
            groups[top..].iter().position(is_epoll).map(|i| top + i)
        } else {
            None
        };
        let extra = epoll.map(|i| groups.swap_remove(i));
        groups.truncate(top);
        groups.extend(extra);
        groups
    }
}

#[cfg(test)]
mod error_tests {
    use super::Error;

    #[test]
    fn the_cause_is_said_once() {
        let io = Error::from(std::io::Error::other("disk on fire"));
        let json = Error::from(serde_json::from_str::<u32>("x").unwrap_err());
        for e in [io, json] {
            // Shown in the message, so not returned again to a chain printer.
            assert!(std::error::Error::source(&e).is_none(), "{e}");
        }
        assert_eq!(
            Error::from(std::io::Error::other("disk on fire")).to_string(),
            "writing the syscall report: disk on fire"
        );
    }
}
