//! The page's tables, computed from the named stacks: per routine its own and total samples (a
//! routine counted once per stack however often it recurses), and for the call-graph view the
//! samples passed along each caller -> callee edge; written as the JSON the page's script reads.
//!
//! The call graph keeps the `GRAPH_ROUTINES` routines of most total samples with up to
//! `GRAPH_EDGES` callers and callees each (the rest summed into one figure), so a profile of any
//! size makes a page a browser opens quickly.

use std::fmt::Write as _;

use super::fold::{Folded, Names};

/// Routines with a call-graph entry.
pub(crate) const GRAPH_ROUTINES: usize = 2000;
/// Callers and callees listed per entry.
pub(crate) const GRAPH_EDGES: usize = 25;

/// Samples by routine of one profile.
pub(crate) struct Stats {
    pub(crate) own: Vec<u128>,
    pub(crate) total: Vec<u128>,
}

/// Counts `folded`'s samples by routine (ids of `names`): own samples at the leaf, total samples
/// once per stack a routine is in.
pub(crate) fn stats(folded: &Folded, names: &Names) -> Stats {
    let n = names.len();
    let mut own = vec![0u128; n];
    let mut total = vec![0u128; n];
    let mut seen = vec![u32::MAX; n];
    for (i, (stack, count)) in folded.iter().enumerate() {
        for &f in stack {
            if seen[f as usize] != i as u32 {
                seen[f as usize] = i as u32;
                total[f as usize] += count;
            }
        }
        if let Some(&leaf) = stack.last() {
            own[leaf as usize] += count;
        }
    }
    Stats { own, total }
}

/// Samples passed along each caller -> callee edge with an end in `keep`, once per stack (only a
/// stack with a repeated routine can repeat an edge). Millions of edges in a large profile, but
/// the page shows only those of the routines it keeps, and counting only those is what makes
/// the exporter fast.
fn edges(folded: &Folded, keep: &[bool]) -> Vec<(u32, u32, u128)> {
    // Collected, sorted and summed: faster than a hash map of a million entries.
    let mut all: Vec<(u64, u128)> = Vec::new();
    let mut seen = vec![u32::MAX; keep.len()];
    let mut done: Vec<u64> = Vec::new();
    for (i, (stack, count)) in folded.iter().enumerate() {
        let mut recursive = false;
        for &f in stack {
            recursive |= seen[f as usize] == i as u32;
            seen[f as usize] = i as u32;
        }
        done.clear();
        for w in stack.windows(2) {
            if !keep[w[0] as usize] && !keep[w[1] as usize] {
                continue;
            }
            let e = (u64::from(w[0]) << 32) | u64::from(w[1]);
            if recursive {
                if done.contains(&e) {
                    continue;
                }
                done.push(e);
            }
            all.push((e, count));
        }
    }
    all.sort_unstable_by_key(|&(e, _)| e);
    let mut out: Vec<(u32, u32, u128)> = Vec::new();
    for (e, n) in all {
        let (from, to) = ((e >> 32) as u32, e as u32);
        match out.last_mut() {
            Some(last) if (last.0, last.1) == (from, to) => last.2 += n,
            _ => out.push((from, to, n)),
        }
    }
    out
}

/// `s` as a JSON string that is also safe inside an HTML `<script>` element.
pub(crate) fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Routine ids in table order: own samples, then total samples, descending; then by name.
fn order(names: &Names, own: &[u128], total: &[u128]) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..names.len() as u32)
        .filter(|&i| total[i as usize] > 0 || own[i as usize] > 0)
        .collect();
    ids.sort_unstable_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        (own[b], total[b])
            .cmp(&(own[a], total[a]))
            .then_with(|| names.names[a].cmp(&names.names[b]))
    });
    ids
}

/// The profile page's data: `routines` rows `[name, kind, self, total]` in table order (a row's
/// index is its id), and `graph` entries `[id, callers, callers_rest, callees, callees_rest]`
/// with `[id, samples]` pairs. One row per line, so golden files diff well.
pub(crate) fn profile_json(out: &mut String, names: &Names, folded: &Folded, st: &Stats) {
    let ids = order(names, &st.own, &st.total);
    let mut row_of = vec![u32::MAX; names.len()];
    for (row, &id) in ids.iter().enumerate() {
        row_of[id as usize] = row as u32;
    }
    let _ = write!(
        out,
        "{{\"mode\":\"profile\",\"total\":{},\"nonIdle\":{},\"graphRoutines\":{},\"graphEdges\":{},\n\"routines\":[",
        folded.total, folded.non_idle, GRAPH_ROUTINES, GRAPH_EDGES
    );
    for (row, &id) in ids.iter().enumerate() {
        out.push_str(if row == 0 { "\n[" } else { ",\n[" });
        json_str(out, &names.names[id as usize]);
        let kind = names.kinds[id as usize].letter();
        let (own, total) = (st.own[id as usize], st.total[id as usize]);
        let _ = write!(out, ",\"{kind}\",{own},{total}]");
    }
    out.push_str("],\n\"graph\":[");

    // The routines of most total samples, and their edges.
    let mut by_total = ids.clone();
    by_total.sort_by(|&a, &b| st.total[b as usize].cmp(&st.total[a as usize]));
    by_total.truncate(GRAPH_ROUTINES);
    let mut slot = vec![u32::MAX; names.len()];
    let mut keep = vec![false; names.len()];
    for (i, &id) in by_total.iter().enumerate() {
        slot[id as usize] = i as u32;
        keep[id as usize] = true;
    }
    let mut callers: Vec<Vec<(u32, u128)>> = vec![Vec::new(); by_total.len()];
    let mut callees: Vec<Vec<(u32, u128)>> = vec![Vec::new(); by_total.len()];
    for (from, to, n) in edges(folded, &keep) {
        if slot[to as usize] != u32::MAX {
            callers[slot[to as usize] as usize].push((row_of[from as usize], n));
        }
        if slot[from as usize] != u32::MAX {
            callees[slot[from as usize] as usize].push((row_of[to as usize], n));
        }
    }
    let list = |out: &mut String, mut v: Vec<(u32, u128)>| {
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let rest: u128 = v.iter().skip(GRAPH_EDGES).map(|e| e.1).sum();
        out.push('[');
        for (i, (row, n)) in v.iter().take(GRAPH_EDGES).enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(out, "{sep}[{row},{n}]");
        }
        let _ = write!(out, "],{rest}");
    };
    let mut entries: Vec<usize> = (0..by_total.len()).collect();
    entries.sort_by_key(|&i| row_of[by_total[i] as usize]);
    for (k, i) in entries.into_iter().enumerate() {
        out.push_str(if k == 0 { "\n[" } else { ",\n[" });
        let _ = write!(out, "{},", row_of[by_total[i] as usize]);
        list(out, std::mem::take(&mut callers[i]));
        out.push(',');
        list(out, std::mem::take(&mut callees[i]));
        out.push(']');
    }
    out.push_str("]}");
}

/// The diff page's data: totals of A and B, the factor A was scaled by, and `routines` rows
/// `[name, kind, selfA, totalA, selfB, totalB]` (raw counts) by the size of the change of the
/// routine's own share, largest first.
pub(crate) fn diff_json(
    out: &mut String,
    names: &Names,
    (fa, sa): (&Folded, &Stats),
    (fb, sb): (&Folded, &Stats),
    scale: f64,
) {
    let share = |n: u128, t: u128| if t == 0 { 0.0 } else { n as f64 / t as f64 };
    let change = |i: usize| (share(sb.own[i], fb.total) - share(sa.own[i], fa.total)).abs();
    let mut ids: Vec<usize> = (0..names.len())
        .filter(|&i| sa.total[i] > 0 || sb.total[i] > 0)
        .collect();
    ids.sort_by(|&a, &b| {
        change(b)
            .total_cmp(&change(a))
            .then_with(|| names.names[a].cmp(&names.names[b]))
    });
    let _ = write!(
        out,
        "{{\"mode\":\"diff\",\"totalA\":{},\"nonIdleA\":{},\"totalB\":{},\"nonIdleB\":{},\"scale\":{scale},\n\"routines\":[",
        fa.total, fa.non_idle, fb.total, fb.non_idle
    );
    for (k, &i) in ids.iter().enumerate() {
        out.push_str(if k == 0 { "\n[" } else { ",\n[" });
        json_str(out, &names.names[i]);
        let kind = names.kinds[i].letter();
        let _ = write!(
            out,
            ",\"{kind}\",{},{},{},{}]",
            sa.own[i], sa.total[i], sb.own[i], sb.total[i]
        );
    }
    out.push_str("]}");
}
