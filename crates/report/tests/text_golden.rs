//! Golden files of every text report (flat profile, call graph, DCPI table, diff) on the small
//! profiles of `text_support`. `PKPROF_BLESS=1 cargo test -p pkprof-report --test text_golden`
//! rewrites them after a deliberate change; a missing golden file fails.

mod text_support;

use pkprof_report::names::NameStyle;
use pkprof_report::select::{ByKey, FrameFilter};
use pkprof_report::{
    write_callgraph, write_dcpi, write_diff, write_flat, CallGraph, SelectOptions, Selection,
};
use text_support::{assert_golden, changed, cycle, render, small, two_parents};

fn sel(p: &pkprof_profile::Profile, opts: SelectOptions) -> Selection {
    Selection::new(&opts, &[p]).expect("valid selection")
}

fn flat_and_graph(p: &pkprof_profile::Profile, s: &Selection) -> String {
    let g = CallGraph::build(p, s).unwrap();
    let mut text = render(|out| write_flat(&g, s, out));
    text.push('\n');
    text.push_str(&render(|out| write_callgraph(&g, s, out)));
    text
}

#[test]
fn small_flat_and_graph() {
    let p = small();
    assert_golden(
        "small_report.txt",
        &flat_and_graph(&p, &sel(&p, SelectOptions::default())),
    );
}

#[test]
fn small_plain_names_user_only() {
    let p = small();
    let s = sel(
        &p,
        SelectOptions {
            names: NameStyle::Plain,
            frames: FrameFilter::UserOnly,
            ..SelectOptions::default()
        },
    );
    assert_golden("small_plain_user_only.txt", &flat_and_graph(&p, &s));
}

#[test]
fn small_filtered_min_percent() {
    let p = small();
    let s = sel(
        &p,
        SelectOptions {
            pids: vec![100],
            min_percent: 10.0,
            ..SelectOptions::default()
        },
    );
    assert_golden("small_pid_min_percent.txt", &flat_and_graph(&p, &s));
}

#[test]
fn two_parents_graph() {
    let p = two_parents();
    assert_golden(
        "two_parents.txt",
        &flat_and_graph(&p, &sel(&p, SelectOptions::default())),
    );
}

#[test]
fn cycle_graph() {
    let p = cycle();
    assert_golden(
        "cycle.txt",
        &flat_and_graph(&p, &sel(&p, SelectOptions::default())),
    );
}

#[test]
fn dcpi_plain() {
    let p = small();
    let s = sel(&p, SelectOptions::default());
    assert_golden("dcpi.txt", &render(|out| write_dcpi(&p, &s, out)));
}

#[test]
fn dcpi_groups() {
    let p = small();
    let s = sel(
        &p,
        SelectOptions {
            groups: vec![
                "read() and related=k:(sys_read|vfs_read|copy_to_user)$".into(),
                "network receive=^OTHERk:".into(),
            ],
            ..SelectOptions::default()
        },
    );
    assert_golden("dcpi_groups.txt", &render(|out| write_dcpi(&p, &s, out)));
}

#[test]
fn dcpi_by_process_and_context() {
    let p = small();
    for (by, file) in [
        (ByKey::Process, "dcpi_by_process.txt"),
        (ByKey::Context, "dcpi_by_context.txt"),
        (ByKey::Bucket, "dcpi_by_bucket.txt"),
    ] {
        let s = sel(
            &p,
            SelectOptions {
                by: Some(by),
                ..SelectOptions::default()
            },
        );
        assert_golden(file, &render(|out| write_dcpi(&p, &s, out)));
    }
}

#[test]
fn diff_of_different_lengths_and_rates() {
    let (a, b) = (small(), changed());
    let s = Selection::new(&SelectOptions::default(), &[&a, &b]).unwrap();
    assert_golden(
        "diff.txt",
        &render(|out| write_diff(&a, &b, ("a.pkprof", "b.pkprof"), &s, out)),
    );
}

#[test]
fn diff_by_process() {
    let (a, b) = (small(), changed());
    let opts = SelectOptions {
        by: Some(ByKey::Process),
        min_percent: 1.0,
        ..SelectOptions::default()
    };
    let s = Selection::new(&opts, &[&a, &b]).unwrap();
    assert_golden(
        "diff_by_process.txt",
        &render(|out| write_diff(&a, &b, ("a.pkprof", "b.pkprof"), &s, out)),
    );
}
