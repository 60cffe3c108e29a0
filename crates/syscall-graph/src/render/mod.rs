//! The reports: `text` (strace -c-like tables, clusters, heaviest edges), `dot` (Graphviz) and
//! `json` (a stable schema, see docs/json.md). Each writes an `Analysis` to a `Write`.

pub mod dot;
pub mod json;
pub mod text;

use crate::clusters::{ClusterGroup, Site};
use crate::costs::{format_ns, Costs, Estimate, Saving};
use crate::model::Lost;
use crate::suggest::{Kind, Shape};

/// How the kind reads in the text report.
pub(crate) fn kind_label(kind: Kind) -> &'static str {
    match kind {
        Kind::SingleCall => "single call",
        Kind::Epoll => "epoll",
        Kind::Multicall => "multi-call",
        Kind::PartialMulticall => "partial multi-call",
        Kind::None => "none",
        Kind::LeaveIt => "leave it",
    }
}

/// "loop", "self-loop", "chain".
pub(crate) fn shape_label(shape: Shape) -> &'static str {
    match shape {
        Shape::SelfLoop => "self-loop",
        Shape::Loop => "loop",
        Shape::Chain => "chain",
    }
}

/// What a cluster's count counts.
pub(crate) fn count_unit(shape: Shape) -> &'static str {
    match shape {
        Shape::SelfLoop => "repeats",
        Shape::Loop => "iterations",
        Shape::Chain => "occurrences",
    }
}

/// A call site's first `max` frames, innermost first: `__libc_write < copy_data < main`.
pub(crate) fn site_frames(site: &Site, max: usize) -> String {
    let mut parts: Vec<String> = site.frames.iter().take(max).map(|f| f.describe()).collect();
    if site.frames.len() > max {
        parts.push("...".into());
    }
    if parts.is_empty() {
        return "(no frames)".into();
    }
    parts.join(" < ")
}

/// `1 call`, `2 calls`, `2 processes`.
pub(crate) fn plural(n: u64, what: &str) -> String {
    let suffix = match (n, what.ends_with('s')) {
        (1, _) => "",
        (_, true) => "es",
        (_, false) => "s",
    };
    format!("{n} {what}{suffix}")
}

/// The non-zero counts of `lost`, one phrase each, in field order: what the text and DOT reports
/// print after "Lost:".
pub fn lost_parts(lost: &Lost) -> Vec<String> {
    let mut parts = Vec::new();
    let mut add = |n: u64, text: String| {
        if n > 0 {
            parts.push(text);
        }
    };
    let n = lost.transitions_full;
    add(n, format!("{n} transitions (transition map full)"));
    let n = lost.sites_full;
    add(n, format!("{n} call-site samples (site table full)"));
    let n = lost.stacks_failed;
    add(n, format!("{n} user stacks unreadable"));
    let n = lost.threads_full;
    add(
        n,
        format!(
            "{} not counted (thread state could not be allocated)",
            plural(n, "call")
        ),
    );
    let n = lost.targets_full;
    add(
        n,
        format!(
            "{} not followed (target table full)",
            plural(n, "child process")
        ),
    );
    parts
}

/// A group's saving: its members' estimates summed, or the first member's "unknown".
pub(crate) fn group_saving(g: &ClusterGroup) -> Option<Saving> {
    match g.first().saving.as_ref()? {
        Saving::Unknown { why } => Some(Saving::Unknown { why: why.clone() }),
        Saving::Estimated(_) => Estimate::sum(g.members.iter().filter_map(|c| match &c.saving {
            Some(Saving::Estimated(e)) => Some(e),
            _ => None,
        }))
        .map(Saving::Estimated),
    }
}

/// `1.23 ms (12.3% of the cluster's 10.0 ms; 0.98..1.40 ms, noisy)`.
pub(crate) fn saving_label(s: &Saving) -> String {
    match s {
        Saving::Unknown { why } => format!("unknown ({why})"),
        Saving::Estimated(e) => format!(
            "{} ({:.1}% of the cluster's {}; {}..{}{})",
            format_ns(e.saved_ns as f64),
            e.percent(),
            format_ns(e.cluster_ns as f64),
            format_ns(e.saved_low_ns as f64),
            format_ns(e.saved_high_ns as f64),
            if e.noisy { ", noisy" } else { "" }
        ),
    }
}

/// What the advice's time estimates rest on, one line; None without costs.
pub fn costs_line(costs: &Costs) -> Option<String> {
    match costs {
        Costs::NotGiven => None,
        Costs::Missing(why) => Some(format!("Time saved: unknown: {why}")),
        Costs::Table { table, source } => {
            let (noisy, all) = table.noisy_count();
            let noise = if noisy > 0 {
                format!(
                    "; noisy: {noisy} of {all} measures spread over {:.0}% (p25..p75 / median), \
                     up to {:.0}%",
                    crate::costs::NOISY_SPREAD * 100.0,
                    table.worst_spread() * 100.0
                )
            } else {
                format!(
                    "; spread (p25..p75 / median) at most {:.0}%",
                    table.worst_spread() * 100.0
                )
            };
            let batches = match &table.batched_unavailable {
                Some(why) => format!("; batched ops unavailable: {why}"),
                None => String::new(),
            };
            Some(format!(
                "Time saved: estimated from the {} calibration of {} ({}, kernel {}{noise}{batches})",
                table.mode,
                crate::costs::format_time(table.measured_unix_s),
                source,
                table.key.kernel
            ))
        }
    }
}
