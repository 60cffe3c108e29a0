//! `pkprof diff A B`: the DCPI table of two profiles side by side, with the absolute change (in
//! percentage points of all CPU) and the relative change of every procedure, sorted by the size of
//! the change.
//!
//! Two recordings rarely have the same length, sampling rate or CPU count, so raw samples do not
//! compare. Each row shows, per profile, its share of that profile's own CPU time (`% all`, as in
//! the DCPI table: of the exact CPU time when known) and of its non-idle samples (`% non-idle`),
//! both independent of length and rate, and the CPU seconds it used per wall second of the
//! recording (`CPU s/s` = samples x period / duration: in CPUs). The change columns compare the
//! `% all` shares. The header says what differed and how it was normalised, and each profile's
//! losses.
//!
//! Rows are matched by the names the selection prints: the CLI gives plain names (no PID) unless
//! `--by process` or `--by thread` keeps the PIDs, so two runs of one program match (as `perf diff`
//! matches by module and symbol).

use std::io::Write;

use pkprof_profile::Profile;

use crate::dcpi::DcpiTable;
use crate::format::{fmt_g, percent};
use crate::header::notes;
use crate::select::Selection;
use crate::FastMap;
use crate::ReportError;

/// One procedure (or `--by` key and procedure) in both profiles.
#[derive(Clone, Debug, PartialEq)]
pub struct DiffRow {
    pub key: Option<String>,
    pub procedure: String,
    pub a: (u64, u64),
    pub b: (u64, u64),
    /// Shares of all samples in A and B, in percent.
    pub a_share: f64,
    pub b_share: f64,
}

impl DiffRow {
    /// Change of the share of all CPU, in percentage points.
    pub fn change(&self) -> f64 {
        let c = self.b_share - self.a_share;
        // No "-0.00pp" from rounding noise.
        if c.abs() < 1e-9 {
            0.0
        } else {
            c
        }
    }
}

/// The rows of the diff, sorted by decreasing |change|, then key and name.
pub fn diff_rows(a: &DcpiTable, b: &DcpiTable) -> Vec<DiffRow> {
    let mut map: FastMap<(Option<String>, String), usize> = FastMap::default();
    let mut rows: Vec<DiffRow> = Vec::new();
    for (side, t) in [(0, a), (1, b)] {
        for r in &t.rows {
            let k = (r.key.clone(), r.procedure.clone());
            let i = *map.entry(k).or_insert_with(|| {
                rows.push(DiffRow {
                    key: r.key.clone(),
                    procedure: r.procedure.clone(),
                    a: (0, 0),
                    b: (0, 0),
                    a_share: 0.0,
                    b_share: 0.0,
                });
                rows.len() - 1
            });
            let row = &mut rows[i];
            if side == 0 {
                row.a = (r.samples, r.busy);
                row.a_share = t.percent_all(r.samples);
            } else {
                row.b = (r.samples, r.busy);
                row.b_share = t.percent_all(r.samples);
            }
        }
    }
    rows.sort_by(|x, y| {
        y.change()
            .abs()
            .total_cmp(&x.change().abs())
            .then_with(|| x.key.cmp(&y.key))
            .then_with(|| x.procedure.cmp(&y.procedure))
    });
    rows
}

/// Wall seconds of a recording, when its timestamps make sense.
fn wall_seconds(p: &Profile) -> Option<f64> {
    let (s, e) = (p.meta.start_unix_ns, p.meta.end_unix_ns);
    (e > s && e - s < 1_000_000_000 * 86_400 * 366).then(|| (e - s) as f64 / 1e9)
}

fn describe(name: &str, p: &Profile, t: &DcpiTable) -> String {
    let wall = match wall_seconds(p) {
        Some(w) => format!("{w:.2} s"),
        None => "an unknown time".into(),
    };
    let mut s = format!(
        "{name}: {} samples over {wall} at {} Hz on {} CPUs (each sample {} s of CPU)\n",
        t.profile_samples,
        p.meta.frequency_hz,
        p.meta.cpus,
        fmt_g(t.period_ns as f64 / 1e9)
    );
    for n in notes(p).iter().chain([&t.coverage.all_text()]) {
        s.push_str("  ");
        s.push_str(n);
        s.push('\n');
    }
    s
}

/// Writes the diff of `a` and `b` (named `names` in the header) as `sel` selects.
pub fn write_diff(
    a: &Profile,
    b: &Profile,
    names: (&str, &str),
    sel: &Selection,
    out: &mut dyn Write,
) -> Result<(), ReportError> {
    let label = |e: ReportError, name: &str| match e {
        ReportError::Empty(why) => ReportError::Empty(format!("{why} in {name}")),
        e => e,
    };
    let ta = DcpiTable::build(a, sel).map_err(|e| label(e, names.0))?;
    let tb = DcpiTable::build(b, sel).map_err(|e| label(e, names.1))?;
    let rows = diff_rows(&ta, &tb);
    let (wa, wb) = (wall_seconds(a), wall_seconds(b));

    let mut s = String::new();
    s.push_str(&describe(&format!("A = {}", names.0), a, &ta));
    s.push_str(&describe(&format!("B = {}", names.1), b, &tb));
    let mut differs = Vec::new();
    if wa.map(|w| (w * 100.0).round()) != wb.map(|w| (w * 100.0).round()) {
        differs.push("length");
    }
    if ta.period_ns != tb.period_ns || a.meta.frequency_hz != b.meta.frequency_hz {
        differs.push("sampling rate");
    }
    if a.meta.cpus != b.meta.cpus {
        differs.push("CPU count");
    }
    if differs.is_empty() {
        s.push_str("same length, rate and CPUs: no normalisation needed; rows show shares of each profile's CPU time and CPU seconds per wall second\n");
    } else {
        s.push_str(&format!(
            "normalised: the profiles differ in {}, so rows compare each profile's share of its own CPU time (% all) and non-idle samples (% non-idle) and CPU seconds per wall second (CPU s/s = samples x period / duration), not raw samples\n",
            differs.join(" and ")
        ));
    }
    if wa.is_none() || wb.is_none() {
        s.push_str("CPU s/s is blank for a profile without a valid duration\n");
    }
    if let Some(f) = sel.filters_text() {
        s.push_str(&format!(
            "filters {f}: {} samples of A, {} of B\n",
            ta.selected, tb.selected
        ));
    }
    s.push_str(
        "change: B's % all minus A's, in percentage points; relative: change / A's % all\n\n",
    );
    let key_width = sel.by.map(|by| {
        rows.iter()
            .filter_map(|r| r.key.as_deref())
            .map(|k| k.chars().count())
            .chain([by.name().len()])
            .max()
            .unwrap_or(0)
    });
    let side = |name: &str| {
        format!(
            "{:>10} {:>9} {:>13} {:>10}",
            format!("{name} samples"),
            format!("{name} % all"),
            format!("{name} % non-idle"),
            format!("{name} CPU s/s")
        )
    };
    s.push_str(&format!(
        "{}  {}  {:>10} {:>9}  ",
        side("A"),
        side("B"),
        "change",
        "relative"
    ));
    if let (Some(w), Some(by)) = (key_width, sel.by) {
        s.push_str(&format!("{:<w$}  ", by.name()));
    }
    s.push_str("procedure\n");
    out.write_all(s.as_bytes())?;

    let mut hidden = 0usize;
    for r in &rows {
        if r.a_share < sel.min_percent && r.b_share < sel.min_percent {
            hidden += 1;
            continue;
        }
        s.clear();
        s.push_str(&cells(r.a, &ta, wa));
        s.push_str("  ");
        s.push_str(&cells(r.b, &tb, wb));
        s.push_str(&format!("  {:>+8.2}pp", r.change()));
        let rel = if r.a.0 == 0 {
            "new".to_string()
        } else {
            format!("{:+.1}%", r.change() / r.a_share * 100.0)
        };
        s.push_str(&format!(" {rel:>9}  "));
        if let Some(w) = key_width {
            s.push_str(&format!("{:<w$}  ", r.key.as_deref().unwrap_or("")));
        }
        s.push_str(&r.procedure);
        s.push('\n');
        out.write_all(s.as_bytes())?;
    }
    if hidden > 0 {
        writeln!(
            out,
            "\n{hidden} row{} under {}% of all in both profiles not shown.",
            if hidden == 1 { "" } else { "s" },
            sel.min_percent
        )?;
    }
    Ok(())
}

/// samples, % all, % non-idle, CPU s/s of one side.
fn cells((samples, busy): (u64, u64), t: &DcpiTable, wall: Option<f64>) -> String {
    let all = if samples > 0 {
        format!("{:.2}%", t.percent_all(samples))
    } else {
        String::new()
    };
    let non_idle = if busy > 0 {
        format!("{:.2}%", percent(busy, t.profile_busy))
    } else {
        String::new()
    };
    let rate = match wall {
        Some(w) if samples > 0 => format!("{:.3}", samples as f64 * t.period_ns as f64 / 1e9 / w),
        _ => String::new(),
    };
    let n = if samples > 0 {
        samples.to_string()
    } else {
        String::new()
    };
    format!("{n:>10} {all:>9} {non_idle:>13} {rate:>10}")
}
