//! gprof's flat profile, column for column, from the measured call graph, with one extra column:
//! the routine's share of the non-idle CPU samples.
//!
//! ```text
//! Flat profile:
//!
//! Each sample counts as 0.01 seconds.
//! lost: none
//! % of non-idle: self samples as a share of the profile's 100 samples outside the IDLE bucket.
//!   %   cumulative   self              self     total       % of
//!  time   seconds   seconds    calls  ms/call  ms/call  non-idle  name
//!  50.00      1.00     1.00                                       IDLE:default_idle
//!  15.00      1.30     0.30                                30.00  100u:parse
//!   5.00      1.90     0.10     1000     0.10     0.60     10.00  100u:handle
//! ```
//!
//! Sorted by self time, then calls, then name (as gprof). `calls`, `self ms/call` and
//! `total ms/call` are filled only for routines with an exact count (syscalls counted with
//! `record --syscalls`, functions counted with `record --count`) and blank elsewhere. The per-call
//! unit is chosen as GNU gprof does, from the largest time per call (ms when nothing is counted).
//! `% time` is of the selected samples; `% of non-idle` of the profile's samples outside the IDLE
//! bucket, before any filter (blank for idle routines). Trailing blanks are trimmed. The header
//! states the losses and, when idle was under-sampled, both idle figures ([`crate::header`]).

use std::io::Write;

use crate::format::{fixed2, fmt_g, percent};
use crate::graph::CallGraph;
use crate::select::Selection;
use crate::ReportError;

/// gprof's SI prefixes for the per-call columns: (multiplier from seconds, prefix).
const UNITS: [(f64, char); 9] = [
    (1e-12, 'T'),
    (1e-9, 'G'),
    (1e-6, 'M'),
    (1e-3, 'K'),
    (1.0, ' '),
    (1e3, 'm'),
    (1e6, 'u'),
    (1e9, 'n'),
    (1e12, 'p'),
];

/// Writes the flat profile of `g`.
pub fn write_flat(g: &CallGraph, sel: &Selection, out: &mut dyn Write) -> Result<(), ReportError> {
    let mut rows: Vec<usize> = (0..g.routines.len())
        .filter(|&i| {
            let r = &g.routines[i];
            r.self_samples > 0 || r.calls.is_some_and(|c| c > 0)
        })
        .collect();
    rows.sort_by(|&a, &b| {
        let (ra, rb) = (&g.routines[a], &g.routines[b]);
        rb.self_samples
            .cmp(&ra.self_samples)
            .then_with(|| rb.calls.unwrap_or(0).cmp(&ra.calls.unwrap_or(0)))
            .then_with(|| ra.label.cmp(&rb.label))
    });

    // The per-call unit, from the routine with the largest time per call (GNU gprof).
    let top = rows
        .iter()
        .filter_map(|&i| {
            let r = &g.routines[i];
            r.calls
                .filter(|&c| c > 0)
                .map(|c| g.seconds(r.total) / c as f64)
        })
        .fold(0.0f64, f64::max);
    let (scale, prefix) = if top > 0.0 {
        UNITS
            .iter()
            .copied()
            .find(|(s, _)| (1.0..1000.0).contains(&(s * top)))
            .unwrap_or(UNITS[UNITS.len() - 1])
    } else {
        (1e3, 'm')
    };
    let unit = format!("{prefix}s/call");

    let mut text = String::new();
    text.push_str("Flat profile:\n\n");
    text.push_str(&format!(
        "Each sample counts as {} seconds.\n",
        fmt_g(g.period_ns as f64 / 1e9)
    ));
    for n in &g.notes {
        text.push_str(n);
        text.push('\n');
    }
    if let Some(f) = sel.filters_text() {
        text.push_str(&format!(
            "Filters {f}: {} of the profile's {} samples; % time is of these.\n",
            g.samples, g.profile_samples
        ));
    }
    text.push_str(&format!(
        "% of non-idle: self samples as a share of the profile's {} samples outside the IDLE bucket.\n",
        g.profile_busy
    ));
    text.push_str(&trim_end(&format!(
        "{:>5} {:>10} {:>8} {:>8} {:>8} {:>8}  {:>8}\n",
        "%  ", "cumulative", "self  ", "", "self  ", "total ", "% of"
    )));
    text.push_str(&format!(
        "{:>5} {:>9}  {:>8} {:>8} {:>8} {:>8}  {:>8}  name\n",
        "time", "seconds", "seconds", "calls", unit, unit, "non-idle"
    ));
    out.write_all(text.as_bytes())?;

    let mut cumulative = 0u64;
    let mut hidden = 0usize;
    let mut line = String::new();
    for &i in &rows {
        let r = &g.routines[i];
        let pct = g.percent(r.self_samples);
        if pct < sel.min_percent {
            hidden += 1;
            continue;
        }
        cumulative += r.self_samples;
        line.clear();
        line.push_str(&format!("{pct:6.2} "));
        let mut secs = Vec::with_capacity(18);
        fixed2(&mut secs, g.hundredths(cumulative), 9);
        secs.push(b' ');
        fixed2(&mut secs, g.hundredths(r.self_samples), 8);
        line.push_str(std::str::from_utf8(&secs).expect("digits are ASCII"));
        match r.calls {
            Some(c) if c > 0 => line.push_str(&format!(
                " {:8} {:8.2} {:8.2}",
                c,
                scale * g.seconds(r.self_samples) / c as f64,
                scale * g.seconds(r.total) / c as f64
            )),
            _ => line.push_str(&" ".repeat(27)),
        }
        if r.self_busy > 0 {
            line.push_str(&format!("  {:8.2}", percent(r.self_busy, g.profile_busy)));
        } else {
            line.push_str(&" ".repeat(10));
        }
        line.push_str("  ");
        line.push_str(&r.label);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    if hidden > 0 {
        writeln!(
            out,
            "\n{hidden} routine{} under {}% of the time not shown.",
            if hidden == 1 { "" } else { "s" },
            sel.min_percent
        )?;
    }
    Ok(())
}

fn trim_end(s: &str) -> String {
    let mut t = s.trim_end().to_string();
    t.push('\n');
    t
}
