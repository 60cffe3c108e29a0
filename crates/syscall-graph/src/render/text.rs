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

/// `820 (790..850) ns`, `1.39 (1.35..1.40) µs`, with `*` after a noisy figure: the unit of the
/// median for all three.
fn measure_cell(m: &crate::costs::Measure) -> String {
    let (div, unit, digits) = match m.median_ns.abs() {
        x if x >= 1e6 => (1e6, "ms", 2),
        x if x >= 1e3 => (1e3, "µs", 2),
        _ => (1.0, "ns", 0),
    };
    format!(
        "{:.*} ({:.*}..{:.*}) {unit}{}",
        digits,
        m.median_ns / div,
        digits,
        m.p25_ns / div,
        digits,
        m.p75_ns / div,
        if m.noisy() { " *" } else { "  " }
    )
}

/// The cost table `pkprof syscalls --calibrate` prints: per op kind and target the plain call,
/// the op in a batch and the fixed cost per batch, which side wins per op, then the single calls
/// against the calls they replace. `where_` says where it is cached (or why not).
pub fn cost_table(
    t: &crate::costs::CostTable,
    where_: &str,
    out: &mut dyn Write,
) -> Result<(), Error> {
    use crate::costs::{format_ns, format_time, NOISY_SPREAD};
    writeln!(
        out,
        "pkprof syscalls --calibrate ({}): {}, {:.1} s, kernel {}, {}, pkprof {}",
        t.mode,
        format_time(t.measured_unix_s),
        t.seconds,
        t.key.kernel,
        t.key.cpu,
        t.key.pkprof_version
    )?;
    writeln!(
        out,
        "Median (p25..p75) of repeated measures; * marks a spread over {:.0}% of the median \
         (noisy: the machine was busy).",
        NOISY_SPREAD * 100.0
    )?;
    writeln!(out, "  batches run by {}", t.engine)?;
    for (on, what) in &t.targets {
        writeln!(out, "  {on:6} {what}")?;
    }
    writeln!(out, "  crossing (getppid): {}", measure_cell(&t.crossing))?;
    match &t.batched_unavailable {
        Some(why) => writeln!(
            out,
            "\nBatched ops unavailable ({why}): no multi-call is suggested."
        )?,
        None => writeln!(
            out,
            "\nPer op: plain system call; in a batch of {} (per op, beyond the batch's fixed cost); \
             fixed cost per batch; the saving per op of a batch of {} (negative: plain wins); \
             what the op costs more linked to the one before it (the batch is one linked \
             chain; `-`: not measured).",
            t.batch_size, t.batch_size
        )?,
    }
    writeln!(
        out,
        "{:8} {:6} {:17} {:>24} {:>24} {:>24} {:>12} {:>22}",
        "op", "on", "batched as", "plain", "batched per op", "per batch", "saving/op", "link"
    )?;
    for o in &t.ops {
        let (b, f, save) = match (o.batched, o.batch_fixed) {
            (Some(b), Some(f)) => {
                let n = f64::from(t.batch_size.max(1));
                let save = o.plain.median_ns - b.median_ns - f.median_ns / n;
                (measure_cell(&b), measure_cell(&f), format_ns(save))
            }
            _ => ("-".into(), "-".into(), "-".into()),
        };
        let link = o
            .unlinked
            // Not starred: a link is a difference of tens of ns, its spread no sign of noise.
            .map_or_else(
                || "-".to_string(),
                |u| {
                    measure_cell(&u.link)
                        .trim_end_matches('*')
                        .trim_end()
                        .to_string()
                },
            );
        writeln!(
            out,
            "{:8} {:6} {:17} {:>24} {:>24} {:>24} {:>12} {:>22}",
            o.op,
            o.on,
            if o.variant.is_empty() {
                "fd"
            } else {
                &o.variant
            },
            measure_cell(&o.plain),
            b,
            f,
            save,
            link
        )?;
    }
    if !t.single_calls.is_empty() {
        writeln!(
            out,
            "\nSingle calls, per unit, against the calls they replace"
        )?;
        writeln!(
            out,
            "{:16} {:>24} {:>24} {:>12}  unit",
            "call", "single call", "replaced calls", "saving"
        )?;
        for s in &t.single_calls {
            writeln!(
                out,
                "{:16} {:>24} {:>24} {:>12}  {}",
                s.call,
                measure_cell(&s.single),
                measure_cell(&s.plain),
                format_ns(s.plain.median_ns - s.single.median_ns),
                s.unit
            )?;
        }
    }
    let (noisy, all) = t.noisy_count();
    if noisy > 0 {
        writeln!(
            out,
            "\nNoisy: {noisy} of {all} figures spread over {:.0}% (up to {:.0}%): the machine was \
             busy; calibrate again when it is quiet.",
            NOISY_SPREAD * 100.0,
            t.worst_spread() * 100.0
        )?;
    }
    writeln!(out, "\n{where_}")?;
    Ok(())
}
