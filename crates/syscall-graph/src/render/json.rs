//! The JSON report: one document whose schema (`pkprof-syscalls/1`) is described in
//! docs/json.md; the types below are that schema, for writers and readers alike.

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::costs::{Alternative, CostTable, Costs, Saving};
use crate::graph::Graph;
use crate::model::Lost;
use crate::render::group_saving;
use crate::suggest::{Shape, Suggestion};
use crate::{Analysis, ClusterGroup, Error};

/// The value of `schema`; changes when a field changes meaning or goes away.
pub const SCHEMA: &str = "pkprof-syscalls/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub target: String,
    pub duration_ns: u64,
    pub args_split: bool,
    pub total_calls: u64,
    pub total_errors: u64,
    pub total_ns: u64,
    /// Whole profile by syscall name, most calls first.
    pub syscalls: Vec<SyscallRow>,
    /// Most calls first.
    pub processes: Vec<Process>,
    /// By pid, then tid.
    pub threads: Vec<Thread>,
    /// The listed clusters, best first, grouped across the threads of one program
    /// (`Analysis::top_groups`).
    pub clusters: Vec<Cluster>,
    /// How many clusters were found in all, one per thread, listed or not.
    pub clusters_found: usize,
    /// How many groups those make (absent in older reports: 0).
    #[serde(default)]
    pub groups_found: usize,
    pub lost: Lost,
    /// The cost table the advice was measured against, or why there is none (absent when the
    /// analysis was given no costs, as in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs: Option<CostsReport>,
}

/// `costs`: the table and where it came from, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostsReport {
    /// The cache file, or "measured now".
    pub source: Option<String>,
    /// Why there is no table, and how to measure one.
    pub missing: Option<String>,
    pub table: Option<CostTable>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallRow {
    pub name: String,
    pub nr: u32,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
    pub tids: Vec<u32>,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub syscalls: Vec<SyscallRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
    /// Most calls first; `id` is the position in this array.
    pub nodes: Vec<GraphNode>,
    /// Heaviest first.
    pub edges: Vec<GraphEdge>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphNode {
    pub id: usize,
    /// `read` or, split by argument, `read(fd=3, 2K..4K)`.
    pub label: String,
    pub name: String,
    pub nr: u32,
    pub fd: Option<i64>,
    pub size_class: Option<u8>,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphEdge {
    /// A node id; null: `to` was the thread's first call.
    pub from: Option<usize>,
    pub to: usize,
    pub count: u64,
    pub errors: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    pub rank: usize,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub shape: Shape,
    /// Syscall names in order (one iteration for loops).
    pub path: Vec<String>,
    /// The same nodes' labels (with their argument split, if any).
    pub nodes: Vec<String>,
    pub count: u64,
    /// `count` is exactly the times the path ran (absent in older reports: false).
    #[serde(default)]
    pub count_exact: bool,
    pub crossings_saved: u64,
    pub thread_calls: u64,
    pub suggestion: Suggestion,
    pub sites: Vec<Site>,
    /// Threads the cluster was found in (absent in older reports, which have one per entry: 0).
    #[serde(default)]
    pub threads: usize,
    /// The per-thread clusters of the group, best first (absent in older reports: empty).
    #[serde(default)]
    pub members: Vec<Member>,
    /// The time the suggestion is expected to save, summed over the members (absent without
    /// costs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saving: Option<Saving>,
    /// Every replacement the measured advice weighed for the group's first member, with its
    /// saving for that member alone (absent without a table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
}

/// One thread's cluster in a group (`clusters[].members[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its rank among all per-thread clusters.
    pub rank: usize,
    pub pid: u32,
    pub tid: u32,
    pub count: u64,
    pub count_exact: bool,
    pub crossings_saved: u64,
    pub thread_calls: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    pub syscall: String,
    pub count: u64,
    /// Innermost first.
    pub frames: Vec<SiteFrame>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteFrame {
    pub addr: u64,
    pub symbol: Option<String>,
    pub module: Option<String>,
    /// `symbol`, else `module+0xoffset`, else `0xaddr`.
    pub text: String,
}

fn rows(g: &Graph) -> Vec<SyscallRow> {
    let mut rows: Vec<SyscallRow> = g
        .nodes
        .iter()
        .filter(|n| n.calls > 0)
        .map(|n| SyscallRow {
            name: n.node.name.clone(),
            nr: n.node.nr,
            calls: n.calls,
            errors: n.errors,
            total_ns: n.total_ns,
        })
        .collect();
    rows.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// The report as data.
pub fn report(a: &Analysis) -> Report {
    Report {
        schema: SCHEMA.into(),
        target: a.target.clone(),
        duration_ns: a.duration_ns,
        args_split: a.args_split,
        total_calls: a.total.calls(),
        total_errors: a.total.errors(),
        total_ns: a.total.total_ns(),
        syscalls: rows(&a.syscalls),
        processes: a
            .processes
            .iter()
            .map(|p| Process {
                pid: p.pid,
                comm: p.comm.clone(),
                tids: p.tids.clone(),
                calls: p.graph.calls(),
                errors: p.graph.errors(),
                total_ns: p.graph.total_ns(),
                syscalls: rows(&p.graph.by_name()),
            })
            .collect(),
        threads: a
            .threads
            .iter()
            .map(|t| Thread {
                pid: t.pid,
                tid: t.tid,
                comm: t.comm.clone(),
                calls: t.graph.calls(),
                errors: t.graph.errors(),
                total_ns: t.graph.total_ns(),
                nodes: t
                    .graph
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(id, n)| GraphNode {
                        id,
                        label: n.node.to_string(),
                        name: n.node.name.clone(),
                        nr: n.node.nr,
                        fd: n.node.arg.fd,
                        size_class: n.node.arg.size_class,
                        calls: n.calls,
                        errors: n.errors,
                        total_ns: n.total_ns,
                    })
                    .collect(),
                edges: t
                    .graph
                    .edges
                    .iter()
                    .map(|e| GraphEdge {
                        from: e.from,
                        to: e.to,
                        count: e.count,
                        errors: e.errors,
                        total_ns: e.total_ns,
                    })
                    .collect(),
            })
            .collect(),
        clusters: a.top_groups().iter().map(cluster).collect(),
        clusters_found: a.clusters.len(),
        groups_found: a.cluster_groups().len(),
        lost: a.lost.clone(),
        costs: match &a.costs {
            Costs::NotGiven => None,
            Costs::Missing(why) => Some(CostsReport {
                source: None,
                missing: Some(why.clone()),
                table: None,
            }),
            Costs::Table { table, source } => Some(CostsReport {
                source: Some(source.clone()),
                missing: None,
                table: Some((**table).clone()),
            }),
        },
    }
}

fn cluster(g: &ClusterGroup) -> Cluster {
    let c = g.first();
    Cluster {
        rank: g.rank,
        pid: c.pid,
        tid: c.tid,
        comm: c.comm.clone(),
        shape: c.shape,
        path: c.path.iter().map(|n| n.name.clone()).collect(),
        nodes: c.path.iter().map(|n| n.to_string()).collect(),
        count: g.count,
        count_exact: g.count_exact,
        crossings_saved: g.crossings_saved,
        thread_calls: g.thread_calls,
        suggestion: c.suggestion.clone(),
        sites: g
            .sites
            .iter()
            .map(|s| Site {
                syscall: s.syscall.clone(),
                count: s.count,
                frames: s
                    .frames
                    .iter()
                    .map(|f| SiteFrame {
                        addr: f.addr,
                        symbol: f.symbol.clone(),
                        module: f.module.clone(),
                        text: f.describe(),
                    })
                    .collect(),
            })
            .collect(),
        threads: g.threads(),
        members: g
            .members
            .iter()
            .map(|m| Member {
                rank: m.rank,
                pid: m.pid,
                tid: m.tid,
                count: m.count,
                count_exact: m.count_exact,
                crossings_saved: m.crossings_saved,
                thread_calls: m.thread_calls,
            })
            .collect(),
        saving: group_saving(g),
        alternatives: c.alternatives.clone(),
    }
}

/// Writes the report as pretty-printed JSON with a final newline.
pub fn write(a: &Analysis, out: &mut dyn Write) -> Result<(), Error> {
    serde_json::to_writer_pretty(&mut *out, &report(a))?;
    writeln!(out)?;
    Ok(())
}
