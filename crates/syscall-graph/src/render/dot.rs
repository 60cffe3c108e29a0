//! The Graphviz report: one box per process holding its syscall graph (threads merged); nodes
//! labelled with the syscall and its calls, edges with their weight, pen width growing with the
//! logarithm of the weight, and the edges of the listed clusters (`Analysis::top_groups`, in
//! every thread of a group, with the group's rank) drawn in red; what the collector lost is in
//! the graph's title.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use crate::render::{lost_parts, plural};
use crate::{Analysis, Error};

/// Edges and nodes of listed clusters that save crossings.
const SAVES: &str = "#d62728";
/// Those of the other listed clusters (epoll, no replacement).
const OTHER: &str = "#ff7f0e";

/// Writes the analysis as one `digraph`.
pub fn write(a: &Analysis, out: &mut dyn Write) -> Result<(), Error> {
    // (pid, from, to) of the listed clusters' edges -> their ranks, and whether one saves
    // crossings.
    let mut clustered: BTreeMap<(u32, String, String), (BTreeSet<usize>, bool)> = BTreeMap::new();
    // A group marks the edges of each of its members, with the group's rank.
    for g in a.top_groups() {
        for c in &g.members {
            for (from, to) in c.edges() {
                let entry = clustered
                    .entry((c.pid, from.to_string(), to.to_string()))
                    .or_default();
                entry.0.insert(g.rank);
                entry.1 |= g.crossings_saved > 0;
            }
        }
    }
    let max = a
        .processes
        .iter()
        .flat_map(|p| p.graph.edges.iter().filter(|e| e.from.is_some()))
        .map(|e| e.count)
        .max()
        .unwrap_or(1);

    let mut title = escape(&format!("pkprof syscalls: {}", a.target))
        + "\\nred: clusters that save kernel crossings, orange: other listed clusters";
    if !a.lost.is_empty() {
        title += &format!("\\nLost: {}", escape(&lost_parts(&a.lost).join(", ")));
    }
    writeln!(out, "digraph pkprof_syscalls {{")?;
    writeln!(
        out,
        "  graph [label=\"{title}\", labelloc=t, fontname=\"Helvetica\", rankdir=TB];"
    )?;
    writeln!(
        out,
        "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f2f2f2\", fontname=\"Helvetica\"];"
    )?;
    writeln!(out, "  edge [fontname=\"Helvetica\", fontsize=10];")?;
    for (pi, p) in a.processes.iter().enumerate() {
        writeln!(out, "  subgraph cluster_p{pi} {{")?;
        writeln!(
            out,
            "    label=\"{}\";",
            escape(&format!(
                "pid {} ({}): {}",
                p.pid,
                p.comm,
                plural(p.graph.calls(), "call")
            ))
        )?;
        // Node label -> whether a cluster through it saves crossings.
        let mut hot_nodes: BTreeMap<&str, bool> = BTreeMap::new();
        for ((pid, from, to), (_, saves)) in clustered.iter() {
            if *pid == p.pid {
                for n in [from, to] {
                    *hot_nodes.entry(n.as_str()).or_default() |= saves;
                }
            }
        }
        for (ni, n) in p.graph.nodes.iter().enumerate() {
            let label = n.node.to_string();
            let mut text = format!("{}\\n{}", escape(&label), plural(n.calls, "call"));
            if n.errors > 0 {
                text.push_str(&format!("\\n{}", plural(n.errors, "error")));
            }
            let hot = match hot_nodes.get(label.as_str()) {
                Some(&saves) => format!(", color=\"{}\", penwidth=2", colour(saves)),
                None => String::new(),
            };
            writeln!(out, "    p{pi}n{ni} [label=\"{text}\"{hot}];")?;
        }
        for e in &p.graph.edges {
            let Some(from) = e.from else { continue };
            let key = (
                p.pid,
                p.graph.nodes[from].node.to_string(),
                p.graph.nodes[e.to].node.to_string(),
            );
            let width = if max > 1 {
                1.0 + 4.0 * (e.count as f64).ln() / (max as f64).ln()
            } else {
                1.0
            };
            let hot = match clustered.get(&key) {
                Some((ranks, saves)) => {
                    let ranks: Vec<String> = ranks.iter().map(|r| format!("#{r}")).collect();
                    let c = colour(*saves);
                    format!(
                        ", color=\"{c}\", fontcolor=\"{c}\", tooltip=\"cluster {}\"",
                        ranks.join(", ")
                    )
                }
                None => String::new(),
            };
            writeln!(
                out,
                "    p{pi}n{from} -> p{pi}n{} [label=\"{}\", penwidth={width:.2}{hot}];",
                e.to, e.count
            )?;
        }
        writeln!(out, "  }}")?;
    }
    writeln!(out, "}}")?;
    Ok(())
}

fn colour(saves: bool) -> &'static str {
    if saves {
        SAVES
    } else {
        OTHER
    }
}

/// Text inside a DOT double-quoted string: backslashes and quotes escaped, control characters
/// (which would end or break the line) replaced by `?`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("x\ny\u{7}"), "x?y?");
        assert_eq!(escape("read(fd=3, 2K..4K)"), "read(fd=3, 2K..4K)");
    }
}
