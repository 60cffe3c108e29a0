//! The text report: a `strace -c`-like table of syscalls (for all processes when there are
//! several, then per process), the listed clusters (`Analysis::top_groups`: one entry for the
//! same cluster in several threads of one program, "in N threads ..." after its path) with count
//! ("at most N" when it is not exact), crossings saved, suggestion and call sites, the heaviest
//! transitions, and what the collector lost.

use std::io::Write;

use crate::graph::Graph;
use crate::render::{
    costs_line, count_unit, group_saving, kind_label, lost_parts, plural, saving_label,
    shape_label, site_frames,
};
use crate::{Analysis, ClusterGroup, Error};

const RULE: &str = "------ ----------- ----------- --------- --------- ----------------";

/// Writes the whole text report.
pub fn write(a: &Analysis, out: &mut dyn Write) -> Result<(), Error> {
    let calls = a.total.calls();
    writeln!(out, "pkprof syscalls: {}", a.target)?;
    writeln!(
        out,
        "{:.3} s, {}, {}, {}, {}{}",
        a.duration_ns as f64 / 1e9,
        plural(a.processes.len() as u64, "process"),
        plural(a.threads.len() as u64, "thread"),
        plural(calls, "call"),
        plural(a.total.errors(), "error"),
        if a.args_split {
            ", nodes split by argument"
        } else {
            ""
        }
    )?;
    if a.processes.len() > 1 {
        writeln!(out, "\nAll processes")?;
        table(&a.syscalls, out)?;
    }
    let shown = a.processes.len().min(a.options.processes);
    for p in &a.processes[..shown] {
        writeln!(
            out,
            "\nProcess {} ({}): {}",
            p.pid,
            p.comm,
            plural(p.tids.len() as u64, "thread")
        )?;
        table(&p.graph.by_name(), out)?;
    }
    if shown < a.processes.len() {
        let rest = &a.processes[shown..];
        writeln!(
            out,
            "\n({} more processes with {} calls not shown)",
            rest.len(),
            rest.iter().map(|p| p.graph.calls()).sum::<u64>()
        )?;
    }
    clusters(a, out)?;
    edges(a, out)?;
    if !a.lost.is_empty() {
        writeln!(out, "\nLost: {}", lost_parts(&a.lost).join(", "))?;
    }
    Ok(())
}

/// `strace -c`'s table: by time spent, most first.
fn table(g: &Graph, out: &mut dyn Write) -> Result<(), Error> {
    let total_ns = g.total_ns();
    writeln!(
        out,
        "% time     seconds  usecs/call     calls    errors syscall"
    )?;
    writeln!(out, "{RULE}")?;
    let mut nodes: Vec<_> = g.nodes.iter().filter(|n| n.calls > 0).collect();
    nodes.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.calls.cmp(&a.calls))
            .then_with(|| a.node.cmp(&b.node))
    });
    for n in nodes {
        row(n.total_ns, total_ns, n.calls, n.errors, &n.node.name, out)?;
    }
    writeln!(out, "{RULE}")?;
    row(total_ns, total_ns, g.calls(), g.errors(), "total", out)
}

fn row(
    ns: u64,
    total_ns: u64,
    calls: u64,
    errors: u64,
    name: &str,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let percent = if total_ns == 0 {
        0.0
    } else {
        100.0 * ns as f64 / total_ns as f64
    };
    let usecs = (ns / 1000).checked_div(calls).unwrap_or(0);
    let errors = if errors == 0 {
        String::new()
    } else {
        errors.to_string()
    };
    writeln!(
        out,
        "{percent:6.2} {:11.6} {usecs:11} {calls:9} {errors:>9} {name}",
        ns as f64 / 1e9
    )?;
    Ok(())
}

fn clusters(a: &Analysis, out: &mut dyn Write) -> Result<(), Error> {
    if a.clusters.is_empty() {
        writeln!(
            out,
            "\nNo cluster: no path or loop ran at least {} times.",
            a.options.min_count
        )?;
        return Ok(());
    }
    let top = a.top_groups();
    if top.is_empty() {
        return Ok(());
    }
    let ranked = top.len().min(a.options.top);
    let extra = match top.get(ranked) {
        Some(e) => format!(", and the best epoll loop, #{}", e.rank),
        None => String::new(),
    };
    let groups = a.cluster_groups().len();
    let grouped = if groups < a.clusters.len() {
        format!(
            "; {} per-thread clusters grouped by program and path",
            a.clusters.len()
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "\nTop clusters by kernel crossings saved ({ranked} of {groups}{extra}{grouped})"
    )?;
    if let Some(line) = costs_line(&a.costs) {
        writeln!(out, "{line}")?;
    }
    for g in top {
        let c = g.first();
        writeln!(
            out,
            "\n#{} {} {}  [{}]",
            g.rank,
            shape_label(c.shape),
            c.path_label(),
            where_label(&g)
        )?;
        let share = if g.thread_calls == 0 {
            0.0
        } else {
            100.0 * g.crossings_saved as f64 / g.thread_calls as f64
        };
        let whose = if g.threads() == 1 {
            "the thread's".to_string()
        } else {
            format!("the {} threads'", g.threads())
        };
        writeln!(
            out,
            "    {}{} {}, {} crossings saved ({share:.1}% of {whose} {} calls)",
            if g.count_exact { "" } else { "at most " },
            g.count,
            count_unit(c.shape),
            g.crossings_saved,
            g.thread_calls
        )?;
        let s = &c.suggestion;
        writeln!(
            out,
            "    suggestion ({}): {}",
            kind_label(s.kind),
            s.replacement.as_deref().unwrap_or("-")
        )?;
        writeln!(out, "      {}", s.why)?;
        if let Some(saving) = group_saving(&g) {
            writeln!(out, "    time saved: {}", saving_label(&saving))?;
        }
        if g.sites.is_empty() {
            writeln!(out, "    call sites: none sampled")?;
        } else {
            writeln!(out, "    call sites (sampled):")?;
            for site in &g.sites {
                writeln!(
                    out,
                    "    {:>8}  {}  {}",
                    site.count,
                    site.syscall,
                    site_frames(site, a.options.frames)
                )?;
            }
        }
    }
    Ok(())
}

/// Ids listed before "..." in a group's note.
const IDS_SHOWN: usize = 6;

/// `pid 4242 tid 4243 (tar)` for one thread; `6 threads of pid 10 (srv): tids 10, 11, ...` or
/// `8 threads in 8 processes of nginx: pids 10, 11, ...` for a group.
fn where_label(g: &ClusterGroup) -> String {
    let c = g.first();
    if g.threads() == 1 {
        return format!("pid {} tid {} ({})", c.pid, c.tid, c.comm);
    }
    let pids = g.pids();
    let (head, ids) = if pids.len() == 1 {
        let mut tids: Vec<u32> = g.members.iter().map(|m| m.tid).collect();
        tids.sort_unstable();
        (format!("of pid {} ({}): tids", c.pid, c.comm), tids)
    } else {
        let n = pids.len() as u64;
        (
            format!("in {} of {}: pids", plural(n, "process"), c.comm),
            pids,
        )
    };
    let mut list: Vec<String> = ids.iter().take(IDS_SHOWN).map(u32::to_string).collect();
    if ids.len() > IDS_SHOWN {
        list.push("...".into());
    }
    format!("in {} threads {head} {}", g.threads(), list.join(", "))
}

/// The heaviest transitions of each process's merged graph, over all processes.
fn edges(a: &Analysis, out: &mut dyn Write) -> Result<(), Error> {
    let mut all: Vec<(&crate::ProcessGraph, &crate::Edge)> = a
        .processes
        .iter()
        .flat_map(|p| {
            p.graph
                .edges
                .iter()
                .filter(|e| e.from.is_some())
                .map(move |e| (p, e))
        })
        .collect();
    if all.is_empty() {
        return Ok(());
    }
    // Stable: processes are in report order and each one's edges heaviest first.
    all.sort_by_key(|(_, e)| std::cmp::Reverse(e.count));
    all.truncate(a.options.top);
    writeln!(out, "\nHeaviest transitions")?;
    writeln!(out, "     count    errors  usecs/call  transition")?;
    for (p, e) in all {
        let from = e
            .from
            .map_or(String::new(), |f| p.graph.nodes[f].node.to_string());
        writeln!(
            out,
            "{:10} {:9} {:11}  {} -> {}  [pid {} ({})]",
            e.count,
            e.errors,
            (e.total_ns / 1000).checked_div(e.count).unwrap_or(0),
            from,
            p.graph.nodes[e.to].node,
            p.pid,
            p.comm
        )?;
    }
    Ok(())
}
