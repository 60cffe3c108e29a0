//! Exact figures of the measured call graph, DCPI tables, diffs and selections on profiles built
//! in code (see `text_support` for the stacks and the hand-worked numbers).

mod text_support;

use pkprof_profile::{Bucket, Profile};
use pkprof_report::diff::diff_rows;
use pkprof_report::graph::ArcKind;
use pkprof_report::names::NameStyle;
use pkprof_report::select::{ByKey, FrameFilter};
use pkprof_report::{write_callgraph, CallGraph, DcpiTable, ReportError, SelectOptions, Selection};
use text_support::{changed, cycle, render, small, two_parents, Builder};

fn graph(p: &Profile, opts: SelectOptions) -> CallGraph {
    let sel = Selection::new(&opts, &[p]).unwrap();
    CallGraph::build(p, &sel).unwrap()
}

fn routine<'a>(g: &'a CallGraph, label: &str) -> &'a pkprof_report::graph::Routine {
    &g.routines[g
        .routine(label)
        .unwrap_or_else(|| panic!("no routine {label}")) as usize]
}

#[test]
fn two_parents_split_40_60() {
    let p = two_parents();
    let g = graph(&p, SelectOptions::default());
    let c = routine(&g, "1u:C");
    assert_eq!((c.self_samples, c.total, c.children), (100, 100, 0));
    let a = g.arc("1u:A", "1u:C").unwrap();
    let b = g.arc("1u:B", "1u:C").unwrap();
    assert_eq!((a.self_samples, a.child_samples), (40, 0));
    assert_eq!((b.self_samples, b.child_samples), (60, 0));
    assert_eq!(g.arc("1u:main", "1u:A").unwrap().child_samples, 40);
    let main = routine(&g, "1u:main");
    assert_eq!((main.self_samples, main.total, main.root), (0, 100, 100));
    // The printed parent lines of C: A passes 0.40 s, B 0.60 s, the larger next to C.
    let sel = Selection::default();
    let text = render(|out| write_callgraph(&g, &sel, out));
    let entry: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("index"))
        .skip(1)
        .take(3)
        .collect();
    assert!(
        entry[0].contains("0.40    0.00") && entry[0].ends_with("1u:A [4]"),
        "{text}"
    );
    assert!(
        entry[1].contains("0.60    0.00") && entry[1].ends_with("1u:B [3]"),
        "{text}"
    );
    assert!(
        entry[2].starts_with("[1]    100.0    1.00    0.00"),
        "{text}"
    );
}

#[test]
fn cycle_a_b_a() {
    let p = cycle();
    let g = graph(&p, SelectOptions::default());
    assert_eq!(g.cycles.len(), 1);
    let cy = &g.cycles[0];
    assert_eq!(cy.number, 1);
    let mut members: Vec<&str> = cy
        .members
        .iter()
        .map(|&m| g.routines[m as usize].label.as_str())
        .collect();
    members.sort_unstable();
    assert_eq!(members, ["1u:A", "1u:B"]);
    assert_eq!((cy.total, cy.self_samples), (46, 34));
    let main = g.routine("1u:main").unwrap();
    assert_eq!(cy.parents, vec![(main, 34, 12)]);
    let a = routine(&g, "1u:A");
    let b = routine(&g, "1u:B");
    assert_eq!((a.self_samples, a.children, a.total), (24, 7, 46));
    assert_eq!((b.self_samples, b.children, b.total), (10, 5, 42));
    assert_eq!(a.cycle, Some(0));
    let c = routine(&g, "1u:C");
    assert_eq!((c.self_samples, c.total, c.cycle), (15, 15, None));
    assert_eq!(g.arc("1u:A", "1u:C").unwrap().self_samples, 7);
    assert_eq!(g.arc("1u:B", "1u:C").unwrap().self_samples, 5);
    assert_eq!(g.arc("1u:main", "1u:C").unwrap().self_samples, 3);
    let entry = g.arc("1u:main", "1u:A").unwrap();
    assert_eq!((entry.self_samples, entry.child_samples), (34, 12));
    assert_eq!(g.arc("1u:A", "1u:B").unwrap().kind, ArcKind::InCycle);
    assert_eq!(g.arc("1u:B", "1u:A").unwrap().kind, ArcKind::InCycle);
    assert_eq!(g.arc("1u:A", "1u:A").unwrap().kind, ArcKind::SelfCall);
    assert_eq!(routine(&g, "1u:main").total, 49);
}

#[test]
fn recursion_counts_once_per_stack() {
    let mut b = Builder::new(100, 1, 1);
    b.proc(1, "app", "main;f;f;f;g", 10)
        .proc(1, "app", "main;f", 5);
    let p = b.build();
    let g = graph(&p, SelectOptions::default());
    let f = routine(&g, "1u:f");
    assert_eq!(
        (f.self_samples, f.total, f.children, f.cycle),
        (5, 15, 10, None)
    );
    assert_eq!(g.arc("1u:f", "1u:g").unwrap().self_samples, 10);
    assert_eq!(g.arc("1u:f", "1u:f").unwrap().kind, ArcKind::SelfCall);
    let into_f = g.arc("1u:main", "1u:f").unwrap();
    assert_eq!((into_f.self_samples, into_f.child_samples), (5, 10));
}

#[test]
fn exact_calls_from_syscalls_and_uprobes() {
    let p = small();
    let g = graph(&p, SelectOptions::default());
    assert_eq!(routine(&g, "100k:sys_read").calls, Some(400));
    assert_eq!(routine(&g, "100k:sys_write").calls, Some(50));
    assert_eq!(routine(&g, "100u:handle").calls, Some(1000));
    // Not counted: blank, never invented.
    for label in [
        "100u:main",
        "100u:parse",
        "100k:vfs_read",
        "KERNEL:rcu_core",
    ] {
        assert_eq!(routine(&g, label).calls, None, "{label}");
    }
    let text = render(|out| pkprof_report::write_flat(&g, &Selection::default(), out));
    let line = |name: &str| {
        text.lines()
            .find(|l| l.ends_with(&format!("  {name}")))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .to_string()
    };
    // sys_read: 20 samples of 10 ms over 400 calls = 0.50 ms a call, none of it its own.
    assert_eq!(
        line("100k:sys_read"),
        "  0.00      2.00     0.00      400     0.00     0.50            100k:sys_read"
    );
    // handle: 10 self and 60 total samples over 1000 calls.
    assert!(line("100u:handle").contains("     1000     0.10     0.60"));
    assert!(line("100u:parse").contains("0.30                                30.00"));
}

#[test]
fn plain_names_sum_exact_calls_of_every_process() {
    let mut b = Builder::new(100, 1, 1);
    b.proc(1, "a", "main;sys_read", 10)
        .proc(2, "b", "main;sys_read", 10)
        .syscall(1, "read", 7)
        .syscall(2, "read", 5);
    let p = b.build();
    let plain = SelectOptions {
        names: NameStyle::Plain,
        ..SelectOptions::default()
    };
    assert_eq!(
        routine(&graph(&p, plain.clone()), "sys_read").calls,
        Some(12)
    );
    // One process without a count: the sum would be a guess, so blank.
    let mut b = Builder::new(100, 1, 1);
    b.proc(1, "a", "main;sys_read", 10)
        .proc(2, "b", "main;sys_read", 10)
        .syscall(1, "read", 7);
    assert_eq!(routine(&graph(&b.build(), plain), "sys_read").calls, None);
}

#[test]
fn groups_fold_routines() {
    let p = small();
    let opts = SelectOptions {
        groups: vec!["io=k:(sys_|vfs_|copy_)".into()],
        ..SelectOptions::default()
    };
    let g = graph(&p, opts.clone());
    let io = routine(&g, "io");
    assert!(io.group);
    // copy_to_user (20) and vfs_write (10) end in the group; calls of a group are not exact.
    assert_eq!((io.self_samples, io.total, io.calls), (30, 30, None));
    assert!(g.routine("100k:sys_read").is_none());
    assert_eq!(g.arc("100u:handle", "io").unwrap().self_samples, 20);
    assert_eq!(g.arc("100u:log", "io").unwrap().self_samples, 10);
    assert!(
        g.arc("io", "io").is_none(),
        "calls inside a group are not arcs"
    );

    let sel = Selection::new(&opts, &[&p]).unwrap();
    let t = DcpiTable::build(&p, &sel).unwrap();
    let row = t.rows.iter().find(|r| r.procedure == "io").unwrap();
    assert_eq!((row.samples, row.busy), (30, 30));
}

#[test]
fn dcpi_by_process() {
    let p = small();
    let opts = SelectOptions {
        by: Some(ByKey::Process),
        ..SelectOptions::default()
    };
    let sel = Selection::new(&opts, &[&p]).unwrap();
    let t = DcpiTable::build(&p, &sel).unwrap();
    assert_eq!(
        (t.profile_samples, t.profile_busy, t.selected),
        (200, 100, 200)
    );
    let keys: Vec<(&str, u64, u64)> = t
        .keys
        .iter()
        .map(|k| (k.key.as_deref().unwrap(), k.samples, k.busy))
        .collect();
    assert_eq!(
        keys,
        [
            ("IDLE", 100, 0),
            ("100 server", 70, 70),
            ("200 client", 20, 20),
            ("KERNEL", 5, 5),
            ("OTHER 300 nginx", 5, 5)
        ]
    );
    let parse = t.rows.iter().find(|r| r.procedure == "100u:parse").unwrap();
    assert_eq!(
        (parse.key.as_deref(), parse.samples),
        (Some("100 server"), 30)
    );
}

#[test]
fn filters_by_pid_comm_bucket_and_side() {
    let p = small();
    let count = |opts: SelectOptions| graph(&p, opts).samples;
    let pids = SelectOptions {
        pids: vec![200],
        ..SelectOptions::default()
    };
    assert_eq!(count(pids), 20);
    let comm = SelectOptions {
        comm: Some("^(server|nginx)$".into()),
        ..SelectOptions::default()
    };
    assert_eq!(count(comm), 75);
    let buckets = SelectOptions {
        buckets: vec![Bucket::Kernel, Bucket::Other],
        ..SelectOptions::default()
    };
    assert_eq!(count(buckets), 10);
    // Kernel only: samples without kernel frames go, syscall stacks start at the boundary.
    let kernel = SelectOptions {
        frames: FrameFilter::KernelOnly,
        ..SelectOptions::default()
    };
    let g = graph(&p, kernel);
    assert_eq!(g.samples, 20 + 10 + 5 + 5 + 100);
    assert_eq!(routine(&g, "100k:sys_read").root, 20);
    let user = SelectOptions {
        frames: FrameFilter::UserOnly,
        ..SelectOptions::default()
    };
    let g = graph(&p, user);
    assert_eq!(g.samples, 90);
    // The syscall samples are now handle's and log's own.
    assert_eq!(routine(&g, "100u:handle").self_samples, 30);
    assert_eq!(routine(&g, "100u:log").self_samples, 10);
}

#[test]
fn apply_gives_exporters_the_selection() {
    let p = small();
    let opts = SelectOptions {
        pids: vec![100],
        frames: FrameFilter::UserOnly,
        groups: vec!["request=u:(handle|parse)$".into()],
        ..SelectOptions::default()
    };
    let sel = Selection::new(&opts, &[&p]).unwrap();
    let f = sel.apply(&p);
    assert_eq!(f.total_samples(), 70);
    let stacks: Vec<String> = f
        .samples
        .iter()
        .map(|s| {
            let names: Vec<&str> = f.stack_frames(s.stack).map(|fr| fr.name.as_str()).collect();
            format!("{} x{}", names.join(";"), s.count)
        })
        .collect();
    assert_eq!(
        stacks,
        [
            "main;request x30",
            "main;request x20",
            "main;request x10",
            "main;log x10"
        ]
    );
    assert_eq!(f.meta, p.meta);

    // Recursion stays; a group's frames become one frame, shared by every stack.
    let mut b = Builder::new(100, 1, 1);
    b.proc(1, "app", "main;f;f;sel_a;sel_b", 2)
        .proc(1, "app", "main;sel_b", 3);
    let p = b.build();
    let opts = SelectOptions {
        groups: vec!["sel=u:sel_".into()],
        ..SelectOptions::default()
    };
    let f = Selection::new(&opts, &[&p]).unwrap().apply(&p);
    let stacks: Vec<Vec<&str>> = f
        .samples
        .iter()
        .map(|s| f.stack_frames(s.stack).map(|fr| fr.name.as_str()).collect())
        .collect();
    assert_eq!(stacks, [vec!["main", "f", "f", "sel"], vec!["main", "sel"]]);
    let sel_ids: Vec<u32> = f
        .samples
        .iter()
        .map(|s| *f.stacks[s.stack as usize].frames.last().unwrap())
        .collect();
    assert_eq!(sel_ids[0], sel_ids[1]);
}

#[test]
fn diff_normalises_shares() {
    let (a, b) = (small(), changed());
    let sel = Selection::new(&SelectOptions::default(), &[&a, &b]).unwrap();
    let (ta, tb) = (
        DcpiTable::build(&a, &sel).unwrap(),
        DcpiTable::build(&b, &sel).unwrap(),
    );
    let rows = diff_rows(&ta, &tb);
    let first: Vec<(&str, f64)> = rows
        .iter()
        .take(4)
        .map(|r| (r.procedure.as_str(), (r.change() * 100.0).round() / 100.0))
        .collect();
    assert_eq!(
        first,
        [
            ("100u:compress", 7.5),
            ("100u:parse", 7.5),
            ("100k:vfs_write", -5.0),
            ("200u:work", -5.0)
        ]
    );
    // copy_to_user: 20 of 200 and 40 of 400 samples: the same share, no change.
    let copy = rows
        .iter()
        .find(|r| r.procedure == "100k:copy_to_user")
        .unwrap();
    assert_eq!((copy.a.0, copy.b.0, copy.change()), (20, 40, 0.0));
}

#[test]
fn bad_selections_are_one_line_errors() {
    let p = small();
    let err = |opts: SelectOptions| {
        let e = Selection::new(&opts, &[&p]).unwrap_err().to_string();
        assert_eq!(e.lines().count(), 1, "{e}");
        e
    };
    let e = err(SelectOptions {
        groups: vec!["x=(".into()],
        ..SelectOptions::default()
    });
    assert!(
        e.starts_with("--group \"x=(\": invalid regular expression"),
        "{e}"
    );
    let e = err(SelectOptions {
        groups: vec!["no-equals".into()],
        ..SelectOptions::default()
    });
    assert!(e.contains("expected NAME=REGEX"), "{e}");
    let e = err(SelectOptions {
        comm: Some("[a-".into()),
        ..SelectOptions::default()
    });
    assert!(
        e.starts_with("--comm \"[a-\": invalid regular expression"),
        "{e}"
    );
    let e = err(SelectOptions {
        pids: vec![100, 4242],
        ..SelectOptions::default()
    });
    assert_eq!(
        e,
        "PID 4242 is not in the profile (its PIDs: 100, 200, 300)"
    );
}

#[test]
fn empty_profiles_and_empty_selections() {
    let empty = Builder::new(100, 1, 1).build();
    let sel = Selection::default();
    let e = CallGraph::build(&empty, &sel).unwrap_err();
    assert!(matches!(e, ReportError::Empty(_)));
    assert_eq!(e.to_string(), "the profile has no samples");
    assert!(DcpiTable::build(&empty, &sel).is_err());

    let p = small();
    let opts = SelectOptions {
        comm: Some("^nobody$".into()),
        ..SelectOptions::default()
    };
    let sel = Selection::new(&opts, &[&p]).unwrap();
    let e = CallGraph::build(&p, &sel).unwrap_err().to_string();
    assert_eq!(
        e,
        "the profile has no samples matching the filters (--comm \"^nobody$\")"
    );
}

#[test]
fn samples_without_a_stack_are_kept() {
    let mut b = Builder::new(100, 1, 1);
    b.proc(7, "x", "", 3).proc(7, "x", "main", 1);
    let p = b.build();
    let g = graph(&p, SelectOptions::default());
    assert_eq!(routine(&g, "7:[no stack]").self_samples, 3);
    assert_eq!(g.samples, 4);
}

/// `--by container` and `--by unit` name what the cgroup paths say (crates/profile/src/cgroup.rs);
/// two cgroups of one container are one row, and a cgroup id the profile has no path for says so.
#[test]
fn dcpi_by_container_and_unit() {
    use pkprof_profile::CgroupInfo;
    const ID: &str = "4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c";
    let mut p = small();
    for s in &mut p.samples {
        s.cgroup_id = match s.pid {
            100 => 10 + s.count % 2, // two cgroups of the same container
            200 => 20,
            300 => 30,
            _ => 0,
        };
    }
    let pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8a3c2e1f_7b6d_4c5e_9f0a_1b2c3d4e5f60.slice";
    p.cgroups = vec![
        CgroupInfo {
            id: 10,
            path: format!("{pod}/cri-containerd-{ID}.scope"),
        },
        CgroupInfo {
            id: 11,
            path: format!("{pod}/cri-containerd-{ID}.scope/sub"),
        },
        CgroupInfo {
            id: 20,
            path: "/system.slice/client.service".into(),
        },
    ];
    let keys = |by| {
        let opts = SelectOptions {
            by: Some(by),
            ..SelectOptions::default()
        };
        let sel = Selection::new(&opts, &[&p]).unwrap();
        let t = DcpiTable::build(&p, &sel).unwrap();
        t.keys
            .iter()
            .map(|k| (k.key.clone().unwrap(), k.samples))
            .collect::<Vec<_>>()
    };
    let own = |v: &[(&str, u64)]| {
        v.iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(ByKey::Container),
        own(&[
            ("container unknown", 110),
            ("containerd:4f1b9c2e8a7d", 70),
            ("no container", 20),
        ])
    );
    assert_eq!(
        keys(ByKey::Unit),
        own(&[
            ("unit unknown", 110),
            (&format!("cri-containerd-{ID}.scope"), 70),
            ("client.service", 20),
        ])
    );
}
