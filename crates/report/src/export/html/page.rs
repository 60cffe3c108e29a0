//! The HTML around the flame graph: head with the inline style, the recording's summary, the
//! search bar, the tables' places, the data and the inline scripts (`assets/`).

use std::io::{self, Write};

use pkprof_profile::{Profile, TargetKind};

use super::escape;
use crate::counts::counted;
use crate::format::{percent, thousands};
use crate::header::{lost_text, user_stacks_text, Coverage};
use crate::names::{frame_label, NameStyle};

const CSS: &str = include_str!("assets/page.css");
const FLAME_JS: &str = include_str!("assets/flame.js");
const TABLES_JS: &str = include_str!("assets/tables.js");

/// What goes into a page.
pub(crate) struct Page<'a> {
    pub(crate) title: &'a str,
    /// HTML (escaped already).
    pub(crate) summary: &'a str,
    /// The inline SVG.
    pub(crate) svg: &'a str,
    /// JSON (safe inside `<script>`).
    pub(crate) data: &'a str,
    pub(crate) diff: bool,
}

pub(crate) fn write(out: &mut dyn Write, p: &Page) -> io::Result<()> {
    let title = escape(p.title);
    let (mode, legend, help) = if p.diff {
        (
            "diff",
            "<span class=\"pk-sw pk-grew\"></span>own samples grew from A to B \
             <span class=\"pk-sw pk-shrank\"></span>shrank \
             <span class=\"pk-sw pk-same\"></span>unchanged",
            "Frames only in A have no width in B and are not drawn: the table lists every routine.",
        )
    } else {
        (
            "profile",
            "<span class=\"pk-sw pk-u\"></span>user code \
             <span class=\"pk-sw pk-s\"></span>syscall boundary \
             <span class=\"pk-sw pk-k\"></span>kernel \
             <span class=\"pk-sw pk-p\"></span>Python \
             <span class=\"pk-sw pk-i\"></span>idle \
             <span class=\"pk-sw pk-match\"></span>search match",
            "Click a frame to zoom in on it (and show it in the call graph); click a faded \
             parent frame or \u{201c}Reset zoom\u{201d} to zoom out; hover for its samples.",
        )
    };
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"pkprof\">\n<title>{title}</title>\n\
         <style>\n{CSS}</style>\n</head>\n<body class=\"pk-{mode}\">\n\
         <header>\n<h1>{title}</h1>\n{summary}<p class=\"pk-legend\">{legend}</p>\n</header>\n\
         <div id=\"pk-toolbar\">\n<label for=\"pk-search\">Search</label>\n\
         <input id=\"pk-search\" type=\"search\" autocomplete=\"off\" spellcheck=\"false\" \
         placeholder=\"regular expression, e.g. sys_ or ^1234u:\">\n\
         <span id=\"pk-status\"></span>\n\
         <button type=\"button\" id=\"pk-unzoom\">Reset zoom</button>\n</div>\n\
         <section id=\"pk-flame\" aria-label=\"flame graph\">\n",
        summary = p.summary,
    )?;
    out.write_all(p.svg.as_bytes())?;
    write!(
        out,
        "\n</section>\n<p class=\"pk-help\">{help}</p>\n<div class=\"pk-tables\">\n\
         <section id=\"pk-flat\">\n<h2 id=\"pk-flat-title\"></h2>\n\
         <p class=\"pk-note\" id=\"pk-flat-note\"></p>\n\
         <div class=\"pk-scroll\"><table id=\"pk-flat-table\"></table></div>\n</section>\n"
    )?;
    if !p.diff {
        out.write_all(
            b"<section id=\"pk-graph\">\n<h2>Call graph</h2>\n<div id=\"pk-graph-body\">\
              <p class=\"pk-note\">Select a routine in the flat profile or the flame graph.</p>\
              </div>\n</section>\n",
        )?;
    }
    out.write_all(
        b"</div>\n<noscript><p>The tables and the flame graph's zoom and search need \
          JavaScript.</p></noscript>\n<script type=\"application/json\" id=\"pk-data\">",
    )?;
    out.write_all(p.data.as_bytes())?;
    write!(
        out,
        "</script>\n<script>\n{FLAME_JS}</script>\n<script>\n{TABLES_JS}</script>\n</body>\n</html>\n"
    )?;
    Ok(())
}

fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

fn share(n: u128, d: u128) -> String {
    format!("{:.1}%", percent(n, d))
}

fn target(p: &Profile) -> String {
    let t = &p.meta.targets;
    let pids = |pids: &[u32]| {
        pids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match t.kind {
        TargetKind::System => "the whole system".to_string(),
        TargetKind::Command => format!(
            "command <code>{}</code> (PID {})",
            escape(&t.command.join(" ")),
            pids(&t.pids)
        ),
        TargetKind::Pids => format!("PIDs {}", pids(&t.pids)),
        TargetKind::Cgroup => format!("cgroup <code>{}</code>", escape(&t.cgroup)),
    }
}

/// The recording described in a few lines of HTML.
pub(crate) fn summary(p: &Profile, names: NameStyle, total: u128, non_idle: u128) -> String {
    let m = &p.meta;
    let c = &m.cpu_time;
    let mut s = format!(
        "<p class=\"pk-meta\">Recorded on <b>{}</b> (kernel {}, {} CPUs) for {} at {} Hz \
         (one sample = {:.3} ms); target: {}; pkprof {}.</p>\n\
         <p class=\"pk-meta\">Samples: <b>{}</b>, non-idle {} ({}). Exact CPU time from the \
         accounting: total {}, idle {}, profiled processes {}, other processes {}, kernel {}.</p>\n",
        escape(&m.hostname),
        escape(&m.kernel),
        m.cpus,
        seconds(m.end_unix_ns.saturating_sub(m.start_unix_ns)),
        m.frequency_hz,
        m.period_ns as f64 / 1e6,
        target(p),
        escape(&m.pkprof_version),
        thousands(total),
        thousands(non_idle),
        share(non_idle, total),
        seconds(c.total_ns),
        seconds(c.idle_ns),
        seconds(c.processes_ns),
        seconds(c.other_ns),
        seconds(c.kernel_ns),
    );
    // The losses and how the samples cover the CPU time: said in every report's header.
    s += &format!(
        "<p class=\"pk-meta pk-lost\">{}.</p>\n",
        escape(&capitalise(&lost_text(&m.lost)))
    );
    if let Some(u) = user_stacks_text(&m.user_stacks) {
        s += &format!(
            "<p class=\"pk-meta pk-user-stacks\">{}.</p>\n",
            escape(&capitalise(&u))
        );
    }
    if let Some(idle) = Coverage::of(p).idle_text() {
        s += &format!(
            "<p class=\"pk-meta pk-idle\">{}. Shares of samples in the tables and the flame \
             graph are of the samples.</p>\n",
            escape(&capitalise(&idle))
        );
    }
    s += &exact_counts(p, names);
    if !m.warnings.is_empty() {
        s += &format!(
            "<details class=\"pk-meta\"><summary>{} warning(s)</summary><ul>",
            m.warnings.len()
        );
        for w in &m.warnings {
            s += &format!("<li>{}</li>", escape(w));
        }
        s += "</ul></details>\n";
    }
    s
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Every exact count (`record --syscalls`, `--count`), sampled or not, in a table under a
/// disclosure: calls are not samples, so they are listed apart from the flame graph and tables.
fn exact_counts(p: &Profile, names: NameStyle) -> String {
    let rows = counted(p);
    if rows.is_empty() {
        return String::new();
    }
    let (syscalls, functions) = (p.syscalls.len(), p.func_counts.len());
    let mut s = format!(
        "<details class=\"pk-meta pk-counts\"><summary>Exact counts: {} syscall row{}, {} \
         counted function{} (every one, sampled or not)</summary>\n<table class=\"pk-sides\">\
         <tr><th>routine</th><th>process</th><th>calls</th><th>errors</th><th>time</th></tr>\n",
        thousands(syscalls as u128),
        if syscalls == 1 { "" } else { "s" },
        thousands(functions as u128),
        if functions == 1 { "" } else { "s" },
    );
    for c in rows {
        s += &format!(
            "<tr><td>{}</td><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&frame_label(c.pid, c.bucket, &c.frame, names)),
            c.pid,
            escape(c.comm),
            thousands(u128::from(c.calls)),
            c.errors
                .map(|e| thousands(u128::from(e)))
                .unwrap_or_default(),
            c.time_ns.map(seconds).unwrap_or_default(),
        );
    }
    s += "</table></details>\n";
    s
}

/// Both recordings side by side, and how they are made comparable.
pub(crate) fn diff_summary(
    (a, ta, na): (&Profile, u128, u128),
    (b, tb, nb): (&Profile, u128, u128),
    scale: f64,
) -> String {
    let mut s = String::from(
        "<table class=\"pk-sides\"><tr><th></th><th>host</th><th>duration</th><th>rate</th>\
         <th>period</th><th>samples</th><th>non-idle</th><th>lost</th></tr>\n",
    );
    for (side, p, t, n) in [("A", a, ta, na), ("B", b, tb, nb)] {
        let m = &p.meta;
        s += &format!(
            "<tr><th>{side}</th><td>{}</td><td>{}</td><td>{} Hz</td><td>{:.3} ms</td>\
             <td>{}</td><td>{} ({})</td><td>{}</td></tr>\n",
            escape(&m.hostname),
            seconds(m.end_unix_ns.saturating_sub(m.start_unix_ns)),
            m.frequency_hz,
            m.period_ns as f64 / 1e6,
            thousands(t),
            thousands(n),
            share(n, t),
            escape(lost_text(&m.lost).trim_start_matches("lost: ")),
        );
    }
    s += "</table>\n";
    for (side, p) in [("A", a), ("B", b)] {
        if let Some(idle) = Coverage::of(p).idle_text() {
            s += &format!(
                "<p class=\"pk-meta pk-idle\">{side}: {}.</p>\n",
                escape(&idle)
            );
        }
    }
    s += "<p class=\"pk-meta pk-norm\">";
    if scale == 1.0 && a.meta.period_ns == b.meta.period_ns {
        s += "Normalisation: none. A and B have the same number of samples at the same period, \
              so sample counts are compared as they are.";
    } else {
        s += &format!(
            "Normalisation: the profiles differ in length or sampling rate, so they are compared \
             by <b>share of all samples</b>: A's counts are multiplied by B's total / A's total = \
             {} / {} = {scale:.4} before subtracting. A frame's colour and the table's changes \
             show how its share changed, not its raw count.",
            thousands(tb),
            thousands(ta),
        );
    }
    s += "</p>\n";
    s
}
