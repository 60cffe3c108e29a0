//! The text reports on a randomised synthetic profile: the measured graph's invariants hold. Speed
//! on the 1M-sample profile is measured by bench/report.sh, not here.

use pkprof_profile::synthetic::synthetic;
use pkprof_report::graph::ArcKind;
use pkprof_report::{write_callgraph, write_dcpi, write_flat, CallGraph, SelectOptions, Selection};

#[test]
fn invariants_on_a_synthetic_profile() {
    let p = synthetic(20_000, 2_000, 300, 7);
    let sel = Selection::new(&SelectOptions::default(), &[&p]).unwrap();
    let g = CallGraph::build(&p, &sel).unwrap();
    assert_eq!(g.samples, p.total_samples());
    let self_sum: u64 = g.routines.iter().map(|r| r.self_samples).sum();
    assert_eq!(self_sum, g.samples, "every sample has one leaf");
    for (i, r) in g.routines.iter().enumerate() {
        assert!(
            r.self_samples <= r.total && r.total <= g.samples,
            "{}",
            r.label
        );
        // Time passed by the arcs into a routine from other components: its total less the
        // samples where it is the root (cycle members: the arcs into the cycle as a whole).
        if r.cycle.is_none() {
            let into: u64 = g
                .parents_of(i as u32)
                .iter()
                .map(|&a| &g.arcs[a as usize])
                .filter(|a| a.kind == ArcKind::Normal)
                .map(|a| a.self_samples + a.child_samples)
                .sum();
            assert_eq!(into, r.total - r.root, "{}", r.label);
            let out: u64 = g
                .children_of(i as u32)
                .iter()
                .map(|&a| &g.arcs[a as usize])
                .filter(|a| a.kind == ArcKind::Normal)
                .map(|a| a.self_samples + a.child_samples)
                .sum();
            assert_eq!(out, r.children, "{}", r.label);
        }
    }
    for c in &g.cycles {
        let members: u64 = c
            .members
            .iter()
            .map(|&m| g.routines[m as usize].self_samples + g.routines[m as usize].children)
            .sum();
        assert_eq!(members, c.total);
        let into: u64 = c.parents.iter().map(|&(_, s, ch)| s + ch).sum();
        assert_eq!(into, c.total - c.root);
    }
    let mut sink = Vec::new();
    write_flat(&g, &sel, &mut sink).unwrap();
    write_callgraph(&g, &sel, &mut sink).unwrap();
    write_dcpi(&p, &sel, &mut sink).unwrap();
    assert!(sink.len() > 10_000);
}
