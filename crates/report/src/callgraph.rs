//! gprof's call-graph profile from the measured call graph: one entry per routine (and per cycle
//! as a whole), sorted by time with self and children, its parents above with the time each
//! passes along its arc, its children below with the time each passes back.
//!
//! The layout is GNU gprof's (`index % time    self  children    called     name`, entries
//! separated by dashes, `<spontaneous>` for routines no sampled stack calls, parents in increasing
//! and children in decreasing order of time, arcs inside a cycle and self-calls with no time,
//! `<cycle N as a whole>` entries listing their members, `<cycle N>` after member names, `(N)` for
//! the index of an entry left out by `--min-percent`), followed by an index by name. The
//! difference: times come from the sampled stacks (see [`crate::graph`]), and `called` is filled
//! only where the count is exact (a routine's calls from syscall or uprobe counts; never per arc).
//!
//! ```text
//! index % time    self  children    called     name
//!                 0.34    0.12                     1u:main [1]
//! [2]     93.9    0.34    0.12                 <cycle 1 as a whole> [2]
//!                 0.24    0.07                     1u:A <cycle 1> [3]
//!                 0.10    0.05                     1u:B <cycle 1> [4]
//! -----------------------------------------------
//!                                                  1u:A <cycle 1> [3]
//!                                                  1u:B <cycle 1> [4]
//!                 0.34    0.12                     1u:main [1]
//! [3]     63.3    0.24    0.07                 1u:A <cycle 1> [3]
//!                 0.07    0.00                     1u:C [5]
//!                                                  1u:B <cycle 1> [4]
//!                                                  1u:A <cycle 1> [3]
//! -----------------------------------------------
//! ```

use std::io::Write;

use crate::format::{fixed2, fmt_g};
use crate::graph::{ArcKind, CallArc, CallGraph, RoutineId};
use crate::select::Selection;
use crate::ReportError;

const DASHES: &str = "-----------------------------------------------";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Entry {
    Routine(RoutineId),
    Cycle(usize),
}

struct Printer<'a> {
    g: &'a CallGraph,
    /// Entry index of each routine and cycle, and whether its entry is printed.
    routine_index: Vec<(usize, bool)>,
    cycle_index: Vec<(usize, bool)>,
    /// Each routine's name as printed (label, `<cycle N>`, `[index]`), and its rank by label.
    names: Vec<String>,
    name_rank: Vec<u32>,
}

/// Spaces before the self column of parent, child and member lines.
const INDENT: &[u8] = b"             ";
/// Spaces for self, children and called columns of a line without time.
const BLANK_LINE: &[u8] = b"                                                 ";

impl Printer<'_> {
    /// The arcs `ids` in gprof's order: parents by increasing time (self-calls first, then arcs
    /// inside the cycle), children by decreasing time (the same, reversed); ties by the name at
    /// the other end. Sorted on one packed integer key per arc.
    fn sorted(&self, ids: &[u32], children: bool) -> Vec<&CallArc> {
        let g = self.g;
        let mut keyed: Vec<(u128, u32)> = ids
            .iter()
            .map(|&i| {
                let a = &g.arcs[i as usize];
                let kind = match a.kind {
                    ArcKind::SelfCall => 0u128,
                    ArcKind::InCycle => 1,
                    ArcKind::Normal => 2,
                };
                let time = u128::from(a.self_samples.saturating_add(a.child_samples));
                let other = if children { a.callee } else { a.caller };
                let name = u128::from(self.name_rank[other as usize]);
                let key = if children {
                    (2 - kind) << 120 | (u128::from(u64::MAX) - time) << 32 | name
                } else {
                    kind << 120 | time << 32 | name
                };
                (key, i)
            })
            .collect();
        keyed.sort_unstable_by_key(|&(k, _)| k);
        keyed
            .into_iter()
            .map(|(_, i)| &g.arcs[i as usize])
            .collect()
    }

    /// `samples` as seconds in gprof's `%7.2f`, computed in integers (hundredths, rounded half up).
    fn secs(&self, s: &mut Vec<u8>, samples: u64) {
        fixed2(s, self.g.hundredths(samples), 7);
    }

    /// A routine's name as gprof prints it: label, `<cycle N>`, `[index]` or `(index)`.
    fn make_name(&self, r: RoutineId) -> String {
        let routine = &self.g.routines[r as usize];
        let mut s = routine.label.clone();
        if let Some(k) = routine.cycle {
            s.push_str(&format!(" <cycle {}>", self.g.cycles[k].number));
        }
        let (i, shown) = self.routine_index[r as usize];
        s.push_str(&if shown {
            format!(" [{i}]")
        } else {
            format!(" ({i})")
        });
        s
    }

    fn cycle_name(&self, k: usize) -> String {
        let (i, shown) = self.cycle_index[k];
        let idx = if shown {
            format!("[{i}]")
        } else {
            format!("({i})")
        };
        format!("<cycle {} as a whole> {idx}", self.g.cycles[k].number)
    }

    /// A parent or child line with time (`called` blank: never exact per arc).
    fn timed_line(&self, s: &mut Vec<u8>, self_samples: u64, child: u64, r: RoutineId) {
        s.extend_from_slice(INDENT);
        self.secs(s, self_samples);
        s.push(b' ');
        self.secs(s, child);
        s.extend_from_slice(b"                     ");
        s.extend_from_slice(self.names[r as usize].as_bytes());
        s.push(b'\n');
    }

    /// A parent or child line inside a cycle or of a self-call: no time.
    fn untimed_line(&self, s: &mut Vec<u8>, r: RoutineId) {
        s.extend_from_slice(BLANK_LINE);
        s.extend_from_slice(self.names[r as usize].as_bytes());
        s.push(b'\n');
    }

    /// `called` of an entry line: the exact count, or blank.
    fn called(calls: Option<u64>) -> String {
        match calls {
            Some(c) if c > 0 => format!(" {c:7} {:7} ", ""),
            _ => format!(" {:7} {:7} ", "", ""),
        }
    }

    /// The `[index]  % time    self  children` start of an entry line.
    fn entry_start(&self, s: &mut Vec<u8>, index: usize, samples: u64, self_samples: u64) {
        s.extend_from_slice(
            format!(
                "{:<6} {:5.1} ",
                format!("[{index}]"),
                self.g.percent(samples)
            )
            .as_bytes(),
        );
        self.secs(s, self_samples);
        s.push(b' ');
        self.secs(s, samples - self_samples);
    }

    fn routine_entry(&self, s: &mut Vec<u8>, r: RoutineId) {
        let g = self.g;
        let routine = &g.routines[r as usize];
        let parents = self.sorted(g.parents_of(r), false);
        if parents.is_empty() {
            s.extend_from_slice(BLANK_LINE);
            s.extend_from_slice(b"<spontaneous>\n");
        }
        for a in parents {
            match a.kind {
                ArcKind::Normal => self.timed_line(s, a.self_samples, a.child_samples, a.caller),
                _ => self.untimed_line(s, a.caller),
            }
        }
        let (i, _) = self.routine_index[r as usize];
        self.entry_start(
            s,
            i,
            routine.self_samples + routine.children,
            routine.self_samples,
        );
        s.extend_from_slice(Self::called(routine.calls).as_bytes());
        s.extend_from_slice(self.names[r as usize].as_bytes());
        s.push(b'\n');
        for a in self.sorted(g.children_of(r), true) {
            match a.kind {
                ArcKind::Normal => self.timed_line(s, a.self_samples, a.child_samples, a.callee),
                _ => self.untimed_line(s, a.callee),
            }
        }
    }

    fn cycle_entry(&self, s: &mut Vec<u8>, k: usize) {
        let g = self.g;
        let cycle = &g.cycles[k];
        let mut parents: Vec<&(RoutineId, u64, u64)> = cycle.parents.iter().collect();
        if parents.is_empty() {
            s.extend_from_slice(BLANK_LINE);
            s.extend_from_slice(b"<spontaneous>\n");
        }
        parents.sort_unstable_by(|a, b| {
            (a.1 + a.2)
                .cmp(&(b.1 + b.2))
                .then(self.name_rank[a.0 as usize].cmp(&self.name_rank[b.0 as usize]))
        });
        for &&(p, self_samples, child) in &parents {
            self.timed_line(s, self_samples, child, p);
        }
        let (i, _) = self.cycle_index[k];
        self.entry_start(s, i, cycle.total, cycle.self_samples);
        s.extend_from_slice(Self::called(None).as_bytes());
        s.extend_from_slice(self.cycle_name(k).as_bytes());
        s.push(b'\n');
        let mut members = cycle.members.clone();
        members.sort_by(|&a, &b| {
            let (ra, rb) = (&g.routines[a as usize], &g.routines[b as usize]);
            (rb.self_samples + rb.children)
                .cmp(&(ra.self_samples + ra.children))
                .then_with(|| ra.label.cmp(&rb.label))
        });
        for m in members {
            let r = &g.routines[m as usize];
            s.extend_from_slice(INDENT);
            self.secs(s, r.self_samples);
            s.push(b' ');
            self.secs(s, r.children);
            s.extend_from_slice(Self::called(r.calls).as_bytes());
            s.extend_from_slice(b"    ");
            s.extend_from_slice(self.names[m as usize].as_bytes());
            s.push(b'\n');
        }
    }
}

impl CallGraph {
    fn label(&self, r: RoutineId) -> &str {
        &self.routines[r as usize].label
    }
}

/// Writes the call-graph profile of `g`.
pub fn write_callgraph(
    g: &CallGraph,
    sel: &Selection,
    out: &mut dyn Write,
) -> Result<(), ReportError> {
    // Entries by decreasing time (self + children), then name.
    let mut entries: Vec<(u64, Entry)> = Vec::with_capacity(g.routines.len() + g.cycles.len());
    for (i, r) in g.routines.iter().enumerate() {
        entries.push((r.self_samples + r.children, Entry::Routine(i as u32)));
    }
    for (k, c) in g.cycles.iter().enumerate() {
        entries.push((c.total, Entry::Cycle(k)));
    }
    let entry_name = |e: &Entry| match e {
        Entry::Routine(r) => g.routines[*r as usize].label.clone(),
        Entry::Cycle(k) => format!("<cycle {}", g.cycles[*k].number),
    };
    entries.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| entry_name(&a.1).cmp(&entry_name(&b.1)))
    });
    let mut by_name: Vec<u32> = (0..g.routines.len() as u32).collect();
    by_name.sort_unstable_by(|&a, &b| g.label(a).cmp(g.label(b)));
    let mut name_rank = vec![0u32; g.routines.len()];
    for (rank, &r) in by_name.iter().enumerate() {
        name_rank[r as usize] = rank as u32;
    }
    let mut p = Printer {
        g,
        routine_index: vec![(0, false); g.routines.len()],
        cycle_index: vec![(0, false); g.cycles.len()],
        names: Vec::new(),
        name_rank,
    };
    for (pos, (time, e)) in entries.iter().enumerate() {
        let shown = g.percent(*time) >= sel.min_percent;
        match e {
            Entry::Routine(r) => p.routine_index[*r as usize] = (pos + 1, shown),
            Entry::Cycle(k) => p.cycle_index[*k] = (pos + 1, shown),
        }
    }
    p.names = (0..g.routines.len() as u32)
        .map(|r| p.make_name(r))
        .collect();

    let mut s = String::new();
    s.push_str("\t\t\tCall graph\n\n\n");
    s.push_str(&format!(
        "granularity: each sample hit covers {} seconds of CPU for {:.2}% of {:.2} seconds\n",
        fmt_g(g.period_ns as f64 / 1e9),
        if g.samples > 0 {
            100.0 / g.samples as f64
        } else {
            0.0
        },
        g.seconds(g.samples)
    ));
    s.push_str(
        "Times are measured from the sampled stacks; called is filled only where counts are exact.\n",
    );
    for n in &g.notes {
        s.push_str(n);
        s.push('\n');
    }
    if let Some(f) = sel.filters_text() {
        s.push_str(&format!(
            "Filters {f}: {} of the profile's {} samples; % time is of these.\n",
            g.samples, g.profile_samples
        ));
    }
    s.push_str("\nindex % time    self  children    called     name\n");
    out.write_all(s.as_bytes())?;

    let mut hidden = 0usize;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    for (_, e) in &entries {
        let shown = match e {
            Entry::Routine(r) => p.routine_index[*r as usize].1,
            Entry::Cycle(k) => p.cycle_index[*k].1,
        };
        if !shown {
            hidden += 1;
            continue;
        }
        match *e {
            Entry::Routine(r) => p.routine_entry(&mut buf, r),
            Entry::Cycle(k) => p.cycle_entry(&mut buf, k),
        }
        buf.extend_from_slice(DASHES.as_bytes());
        buf.push(b'\n');
        if buf.len() > 1 << 16 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    if hidden > 0 {
        writeln!(
            out,
            "\n{hidden} entr{} under {}% of the time not shown.",
            if hidden == 1 { "y" } else { "ies" },
            sel.min_percent
        )?;
    }

    // Index by function name.
    let mut names: Vec<(String, String)> = Vec::with_capacity(entries.len());
    for (pos, (_, e)) in entries.iter().enumerate() {
        let shown = match e {
            Entry::Routine(r) => p.routine_index[*r as usize].1,
            Entry::Cycle(k) => p.cycle_index[*k].1,
        };
        if !shown {
            continue;
        }
        let name = match e {
            Entry::Routine(r) => {
                let routine = &g.routines[*r as usize];
                match routine.cycle {
                    Some(k) => format!("{} <cycle {}>", routine.label, g.cycles[k].number),
                    None => routine.label.clone(),
                }
            }
            Entry::Cycle(k) => format!("<cycle {}>", g.cycles[*k].number),
        };
        names.push((name, format!("[{}]", pos + 1)));
    }
    names.sort();
    s.clear();
    s.push_str("\nIndex by function name\n\n");
    for (name, idx) in &names {
        s.push_str(&format!("{idx:>8} {name}\n"));
    }
    out.write_all(s.as_bytes())?;
    Ok(())
}
