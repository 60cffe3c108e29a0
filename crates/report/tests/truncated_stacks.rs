//! Stacks whose user part was cut short: the root mark `[truncated: <reason>]`
//! (`FrameKind::Truncated`) shows as the stack's outermost routine in every report and export,
//! stays with the user part under `--user-only`, and every text header says how far the user
//! stacks were unwound (`Meta.user_stacks`). The profile is built here by hand: 90 complete
//! samples (`main;work;leaf`) and 10 cut at the stack window (`[truncated: stack window];work;leaf`).

mod text_support;

use std::io::Read as _;

use pkprof_profile::{Profile, Truncation};
use pkprof_report::export::{exporter, html, ExportOptions};
use pkprof_report::select::FrameFilter;
use pkprof_report::{write_callgraph, write_dcpi, write_flat, CallGraph, SelectOptions, Selection};
use text_support::{render, Builder};

const MARK: &str = "[truncated: stack window]";
const LINE: &str = "user stacks: 90 complete (90.0%), truncated 10: 10 stack window";

fn profile() -> Profile {
    let mut b = Builder::new(100, 1, 1);
    b.process(100, "app");
    b.proc(100, "app", "main;work;leaf", 90);
    b.proc(
        100,
        "app",
        &format!("{MARK};work;leaf;sys_read;vfs_read"),
        10,
    );
    let m = b.meta();
    m.user_stacks.add(None, 90);
    m.user_stacks.add(Some(Truncation::StackWindow), 10);
    b.build()
}

fn export(p: &Profile, format: &str) -> String {
    let mut out = Vec::new();
    exporter(format)
        .unwrap()
        .write(p, &ExportOptions::default(), &mut out)
        .unwrap();
    if format == "pprof" {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&out[..])
            .read_to_end(&mut raw)
            .unwrap();
        out = raw;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn text_reports_show_the_mark_and_the_user_stack_line() {
    let p = profile();
    let sel = Selection::new(&SelectOptions::default(), &[&p]).unwrap();
    let g = CallGraph::build(&p, &sel).unwrap();
    let flat = render(|out| write_flat(&g, &sel, out));
    let graph = render(|out| write_callgraph(&g, &sel, out));
    let dcpi = render(|out| write_dcpi(&p, &sel, out));
    for (what, text) in [("flat", &flat), ("graph", &graph), ("dcpi", &dcpi)] {
        let header: String = text.lines().take(12).collect::<Vec<_>>().join("\n");
        assert!(header.contains(LINE), "{what} header:\n{header}");
    }
    // The mark is a routine of its own (no self time, so not in the flat profile), the parent
    // of `work` in the 10 cut samples.
    let entry = graph
        .lines()
        .find(|l| l.starts_with('[') && l.contains(" 100u:work ["))
        .expect("work's entry");
    let at = graph.find(entry).unwrap();
    let parents = &graph[graph[..at].rfind("-----").unwrap()..at];
    assert!(parents.contains(&format!("100u:{MARK}")), "{parents}");
    assert!(parents.contains("100u:main"), "{parents}");
}

#[test]
fn user_only_keeps_the_mark() {
    let p = profile();
    let opts = SelectOptions {
        frames: FrameFilter::UserOnly,
        ..SelectOptions::default()
    };
    let sel = Selection::new(&opts, &[&p]).unwrap();
    let filtered = sel.apply(&p);
    let folded = export(&filtered, "folded");
    assert!(
        folded.contains(&format!("100u:{MARK};100u:work;100u:leaf 10")),
        "{folded}"
    );
    assert!(!folded.contains("vfs_read"), "{folded}");
}

#[test]
fn exports_show_the_mark_as_the_root() {
    let p = profile();
    let folded = export(&p, "folded");
    assert!(
        folded.contains(&format!(
            "100u:{MARK};100u:work;100u:leaf;100k:sys_read;100k:vfs_read 10"
        )),
        "{folded}"
    );
    for format in ["pprof", "speedscope"] {
        assert!(export(&p, format).contains(MARK), "{format}");
    }
    // pprof's comments carry the header lines.
    assert!(export(&p, "pprof").contains(LINE));
    let mut out = Vec::new();
    html::write(&p, &ExportOptions::default(), &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    assert!(
        page.contains("[truncated: stack window]"),
        "the mark in the page"
    );
    assert!(
        page.contains("<p class=\"pk-meta pk-user-stacks\">User stacks: 90 complete (90.0%), truncated 10: 10 stack window.</p>"),
        "the user-stack line in the page header"
    );
}
