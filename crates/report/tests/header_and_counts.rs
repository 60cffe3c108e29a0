//! What every report says in its header (losses; idle under-sampled, with both figures), `% all`
//! of the exact CPU time, and exact counts shown whether or not they were sampled: on
//! `text_support::counted_lossy`, whose figures are worked out by hand there. pprof's comments
//! are read back by `go tool pprof` in `export_pprof.rs`.

mod text_support;

use pkprof_profile::Profile;
use pkprof_report::export::{exporter, html, ExportOptions};
use pkprof_report::names::NameStyle;
use pkprof_report::{
    write_callgraph, write_dcpi, write_diff, write_flat, CallGraph, SelectOptions, Selection,
};
use text_support::{counted_lossy, render, small};

const LOST: &str = "lost: ring buffer full 761, user stacks unreadable 3";
const IDLE: &str =
    "idle under-sampled: the accounting has 50.0% of the CPU time idle, the samples 4.0%";

/// Every exact count of `counted_lossy` as the reports name it, with its calls.
const COUNTED: [(&str, u64); 7] = [
    ("100u:deflate", 600),
    ("100k:sys_read", 12),
    ("100k:sys_write", 7),
    ("100k:sys_openat", 3),
    ("100k:sys_close", 3),
    ("100k:sys_mmap", 9),
    ("OTHERk:sys_futex", 5),
];

fn flat_and_graph(p: &Profile, opts: &SelectOptions) -> (String, String) {
    let sel = Selection::new(opts, &[p]).unwrap();
    let g = CallGraph::build(p, &sel).unwrap();
    (
        render(|out| write_flat(&g, &sel, out)),
        render(|out| write_callgraph(&g, &sel, out)),
    )
}

/// The line of `text` ending in `  name` (flat profile) or ` name [N]` (call-graph entry).
fn line_of<'a>(text: &'a str, tail: &str) -> &'a str {
    text.lines()
        .find(|l| l.ends_with(tail))
        .unwrap_or_else(|| panic!("no line ending in {tail:?} in\n{text}"))
}

#[test]
fn unsampled_counts_appear_in_flat_and_graph() {
    let p = counted_lossy();
    let (flat, graph) = flat_and_graph(&p, &SelectOptions::default());
    for (name, calls) in COUNTED {
        // flat: the calls column right after the two seconds columns.
        let line = line_of(&flat, &format!("  {name}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[3], calls.to_string(), "calls of {name}: {line}");
        // call graph: the entry's `called` column.
        let entry = graph
            .lines()
            .find(|l| l.starts_with('[') && l.contains(&format!(" {name} [")))
            .unwrap_or_else(|| panic!("no call-graph entry for {name} in\n{graph}"));
        let cols: Vec<&str> = entry.split_whitespace().collect();
        assert_eq!(cols[4], calls.to_string(), "called of {name}: {entry}");
    }
    // Never sampled: no time, and no invented arcs.
    assert!(line_of(&flat, "  100u:deflate").starts_with("  0.00 "));
    // Plain names: one routine per name, summed over processes (only pid 100 here).
    let plain = SelectOptions {
        names: NameStyle::Plain,
        ..SelectOptions::default()
    };
    let (flat, _) = flat_and_graph(&p, &plain);
    assert!(line_of(&flat, "  deflate").contains(" 600 "));
    assert!(line_of(&flat, "  sys_futex").contains(" 5 "));
}

#[test]
fn unsampled_counts_follow_the_filters() {
    let p = counted_lossy();
    // -p 100: pid 200's futex is not selected; --user-only: no syscall routines at all.
    let (flat, _) = flat_and_graph(
        &p,
        &SelectOptions {
            pids: vec![100],
            ..SelectOptions::default()
        },
    );
    assert!(flat.contains("  100k:sys_mmap\n"));
    assert!(!flat.contains("sys_futex"), "{flat}");
    let (flat, _) = flat_and_graph(
        &p,
        &SelectOptions {
            frames: pkprof_report::select::FrameFilter::UserOnly,
            ..SelectOptions::default()
        },
    );
    assert!(flat.contains("  100u:deflate\n"));
    assert!(!flat.contains("sys_"), "{flat}");
}

#[test]
fn text_headers_state_losses_and_idle_sampling() {
    let p = counted_lossy();
    let (flat, graph) = flat_and_graph(&p, &SelectOptions::default());
    let sel = Selection::default();
    let dcpi = render(|out| write_dcpi(&p, &sel, out));
    let diff = render(|out| write_diff(&p, &small(), ("a", "b"), &sel, out));
    for (what, text) in [
        ("flat", &flat),
        ("graph", &graph),
        ("dcpi", &dcpi),
        ("diff", &diff),
    ] {
        let header: String = text.lines().take(12).collect::<Vec<_>>().join("\n");
        assert!(header.contains(LOST), "{what} header:\n{header}");
        assert!(header.contains(IDLE), "{what} header:\n{header}");
    }
    // small() lost nothing: said as plainly.
    assert!(diff.contains("  lost: none\n"), "{diff}");
}

#[test]
fn percent_all_is_of_the_exact_cpu_time() {
    let p = counted_lossy();
    let dcpi = render(|out| write_dcpi(&p, &Selection::default(), out));
    // 94 samples of 10 ms of the exact 2 s: 47%, though they are 94% of the samples; the IDLE
    // row has its 4 samples' 2%; % non-idle stays a share of the 96 busy samples.
    assert!(
        line_of(&dcpi, "  100u:deflate_slow")
            .starts_with("       94   47.00%      97.92%   47.00%"),
        "{dcpi}"
    );
    assert!(
        line_of(&dcpi, "  IDLE:do_idle").contains("    2.00%"),
        "{dcpi}"
    );
    assert!(dcpi.contains("of the exact 2.00 CPU seconds"), "{dcpi}");
    assert!(dcpi.contains("the samples cover 50.0% of it"), "{dcpi}");
    // Without the accounting, shares of samples, said so.
    let mut q = p.clone();
    q.meta.cpu_time = Default::default();
    let dcpi = render(|out| write_dcpi(&q, &Selection::default(), out));
    assert!(line_of(&dcpi, "  100u:deflate_slow").contains("   94.00%"));
    assert!(dcpi.contains("% all: of all samples (the profile has no exact CPU time)"));
    assert!(!dcpi.contains("idle under-sampled"));
}

#[test]
fn html_header_states_losses_idle_and_every_count() {
    let p = counted_lossy();
    let mut out = Vec::new();
    html::write(&p, &ExportOptions::default(), &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    let header = &page[page.find("<header>").unwrap()..page.find("</header>").unwrap()];
    assert!(
        header.contains(&format!(
            "<p class=\"pk-meta pk-lost\">L{}.</p>",
            &LOST[1..]
        )),
        "{header}"
    );
    assert!(header.contains(&format!("I{}", &IDLE[1..])), "{header}");
    assert!(header.contains("Exact counts: 6 syscall rows, 1 counted function"));
    for (name, calls) in COUNTED {
        assert!(
            header.contains(&format!("<tr><td>{name}</td>"))
                && header
                    .lines()
                    .any(|l| l.starts_with(&format!("<tr><td>{name}</td>"))
                        && l.contains(&format!("<td>{calls}</td>"))),
            "{name} with {calls} calls in\n{header}"
        );
    }
    // The diff page says each side's losses.
    let mut out = Vec::new();
    html::write_diff(&p, &small(), &ExportOptions::default(), &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    assert!(page.contains("<td>ring buffer full 761, user stacks unreadable 3</td>"));
    assert!(page.contains("<td>none</td>"));
}

#[test]
fn speedscope_title_states_losses() {
    let export = |p: &Profile| {
        let mut out = Vec::new();
        exporter("speedscope")
            .unwrap()
            .write(p, &ExportOptions::default(), &mut out)
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        v["name"].as_str().unwrap().to_string()
    };
    assert_eq!(export(&counted_lossy()), format!("pkprof test ({LOST})"));
    assert_eq!(export(&small()), "pkprof test");
}
