//! The HTML exporter: one self-contained page (no network, all script and style inline) with an
//! interactive flame graph drawn by inferno, a flat profile and a call-graph view, and a search
//! box that filters the tables and highlights matches in the graph; and [`write_diff`], the same
//! page for `pkprof diff` around a differential flame graph of B against A.
//!
//! - `fold`: samples to named stacks; `flame`: the merged tree and inferno's SVG;
//! - `stats`: the tables' figures as JSON; `page`: the HTML around them;
//! - `assets/`: the page's style and scripts, included at build time.

mod flame;
mod fold;
mod page;
mod stats;

use std::io::Write;

use pkprof_profile::Profile;

use super::{ExportOptions, Exporter};
use crate::ReportError;
use flame::Tree;
use fold::{fold, Names};

/// `--format html`.
pub struct HtmlExporter;

impl Exporter for HtmlExporter {
    fn name(&self) -> &'static str {
        "html"
    }

    fn extension(&self) -> &'static str {
        "html"
    }

    fn write(
        &self,
        profile: &Profile,
        opts: &ExportOptions,
        out: &mut dyn Write,
    ) -> Result<(), ReportError> {
        write(profile, opts, out)
    }
}

/// Writes `profile` as a self-contained HTML page.
pub fn write(
    profile: &Profile,
    opts: &ExportOptions,
    out: &mut dyn Write,
) -> Result<(), ReportError> {
    let mut names = Names::default();
    let folded = fold(profile, opts.names, &mut names);
    if folded.total == 0 {
        return Err(ReportError::Empty(String::new()));
    }
    let tree = Tree::build(&[&folded]);
    let svg = tree.svg(&names, false, "Flame graph", None)?;
    let st = stats::stats(&folded, &names);
    let mut data = String::new();
    stats::profile_json(&mut data, &names, &folded, &st);
    let title = if opts.title.is_empty() {
        "pkprof profile"
    } else {
        &opts.title
    };
    let summary = page::summary(profile, opts.names, folded.total, folded.non_idle);
    page::write(
        out,
        &page::Page {
            title,
            summary: &summary,
            svg: &svg,
            data: &data,
            diff: false,
        },
    )?;
    Ok(())
}

/// Writes a page comparing profile `b` against profile `a`: a differential flame graph (widths
/// are B's samples, colours the change of each frame's own samples: red grew, blue shrank) and a
/// table of routines by change. When the profiles differ in sample count or period, A's counts
/// are scaled to B's total first, so shares are compared; the page says so.
pub fn write_diff(
    a: &Profile,
    b: &Profile,
    opts: &ExportOptions,
    out: &mut dyn Write,
) -> Result<(), ReportError> {
    let mut names = Names::default();
    let fa = fold(a, opts.names, &mut names);
    let fb = fold(b, opts.names, &mut names);
    if fa.total == 0 {
        return Err(ReportError::Empty(" (profile A)".to_string()));
    }
    if fb.total == 0 {
        return Err(ReportError::Empty(" (profile B)".to_string()));
    }
    let mut tree = Tree::build(&[&fa, &fb]);
    let normalise = fa.total != fb.total || a.meta.period_ns != b.meta.period_ns;
    let scale = if normalise {
        fb.total as f64 / fa.total as f64
    } else {
        1.0
    };
    if normalise {
        tree.scale_first(scale);
    }
    let subtitle = "Widths: B's samples. Colours: change of each frame's own samples from A to B \
                    (red: more, blue: fewer)";
    let svg = tree.svg(
        &names,
        true,
        "Differential flame graph",
        Some(subtitle.to_string()),
    )?;
    let (sa, sb) = (stats::stats(&fa, &names), stats::stats(&fb, &names));
    let mut data = String::new();
    stats::diff_json(&mut data, &names, (&fa, &sa), (&fb, &sb), scale);
    let title = if opts.title.is_empty() {
        "pkprof diff"
    } else {
        &opts.title
    };
    let summary = page::diff_summary(
        (a, fa.total, fa.non_idle),
        (b, fb.total, fb.non_idle),
        scale,
    );
    page::write(
        out,
        &page::Page {
            title,
            summary: &summary,
            svg: &svg,
            data: &data,
            diff: true,
        },
    )?;
    Ok(())
}

/// `s` escaped for HTML text and attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
