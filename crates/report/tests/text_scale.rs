//! The text reports on large synthetic profiles: the measured graph's invariants hold on a
//! randomised profile, and (ignored by default; run in release) the size benchmark:
//! `cargo test --release -p pkprof-report --test text_scale -- --ignored --nocapture`.

use std::io::{BufWriter, Write};
use std::time::Instant;

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

/// CPU seconds (user + system) this thread has used: wall time on a loaded 2-core machine says
/// little.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of stat (utime, stime), counted from 3 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

#[test]
#[ignore = "benchmark: run in release with --ignored"]
fn one_million_samples_over_50k_stacks() {
    let p = synthetic(1_000_000, 50_000, 5_000, 1);
    let sel = Selection::new(&SelectOptions::default(), &[&p]).unwrap();
    let path = std::env::temp_dir().join(format!("pkprof-report-speed-{}.txt", std::process::id()));
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let g = CallGraph::build(&p, &sel).unwrap();
    let (built_wall, built_cpu) = (wall.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let mut out = BufWriter::new(std::fs::File::create(&path).unwrap());
    write_flat(&g, &sel, &mut out).unwrap();
    write_callgraph(&g, &sel, &mut out).unwrap();
    out.flush().unwrap();
    drop(out);
    let (total_wall, total_cpu) = (wall.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let bytes = std::fs::metadata(&path).unwrap().len();
    std::fs::remove_file(&path).ok();
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    write_dcpi(&p, &sel, &mut std::io::sink()).unwrap();
    let (dcpi_wall, dcpi_cpu) = (wall.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    println!(
        "{} samples ({} groups, {} stacks) -> {} routines, {} arcs, {} cycles",
        p.total_samples(),
        p.samples.len(),
        p.stacks.len(),
        g.routines.len(),
        g.arcs.len(),
        g.cycles.len(),
    );
    println!(
        "call graph measured: {built_wall:.3} s wall, {built_cpu:.2} s CPU; with the flat profile and call graph written ({:.1} MB): {total_wall:.3} s wall, {total_cpu:.2} s CPU; DCPI table: {dcpi_wall:.3} s wall, {dcpi_cpu:.2} s CPU",
        bytes as f64 / 1e6,
    );
    assert!(
        total_cpu < 2.0,
        "flat + call graph took {total_cpu:.2} s of CPU"
    );
}
