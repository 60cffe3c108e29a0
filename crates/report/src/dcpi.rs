//! DCPI-style tables (dcpiprof): per procedure, kernel and user mixed, its samples (the sampled
//! stacks ending in it), its share of all CPU and of the non-idle samples, and the cumulative
//! share; `--group` folds related procedures into one row ("select() and related"); `--by` splits
//! the rows by process, thread, bucket, context or cgroup, after a table of the keys themselves.
//!
//! Shares are of the whole profile, before any filter, so that a filtered table still reads as
//! "% of the machine": `% all` is the sampled time (samples x period) as a share of the exact CPU
//! time of the recording (wall x CPUs, from the accounting) when the profile has it, because idle
//! CPUs may take no samples (see [`crate::header`]), else a share of all samples; `% non-idle` is
//! a share of the samples outside the IDLE bucket.

use std::collections::HashMap;
use std::io::Write;

use pkprof_profile::{Bucket, CgroupLabels, Profile, SampleGroup};

use crate::format::{fmt_g, percent};
use crate::graph::{check_samples, fold, no_match};
use crate::header::{notes, Coverage};
use crate::select::{bucket_name, context_name, ByKey, Selection};
use crate::FastMap;
use crate::ReportError;

/// One row: a procedure (or group), or with `--by` a (key, procedure) pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcpiRow {
    /// The `--by` key's value (`1234 server`, `softirq NET_RX`...), if any.
    pub key: Option<String>,
    pub procedure: String,
    pub samples: u64,
    /// Samples outside the IDLE bucket.
    pub busy: u64,
}

/// A DCPI table before printing.
#[derive(Clone, Debug)]
pub struct DcpiTable {
    pub by: Option<ByKey>,
    /// With `--by`: one row per key value (procedure empty), by decreasing samples.
    pub keys: Vec<DcpiRow>,
    /// By decreasing samples, then key and name.
    pub rows: Vec<DcpiRow>,
    /// Selected samples; all samples and non-idle samples of the profile.
    pub selected: u64,
    pub profile_samples: u64,
    pub profile_busy: u64,
    pub period_ns: u64,
    /// The samples against the exact CPU time: what `% all` is of.
    pub coverage: Coverage,
}

impl DcpiTable {
    /// Computes the table of the samples `sel` selects, split by `sel.by`.
    pub fn build(p: &Profile, sel: &Selection) -> Result<DcpiTable, ReportError> {
        check_samples(p)?;
        let by = sel.by;
        let f = fold(p, sel, by.is_some());
        if f.samples == 0 {
            return Err(no_match(sel));
        }
        let leaf = |stack: u32| {
            let st = &f.stacks[stack as usize];
            f.frames[(st.start + st.len - 1) as usize]
        };
        // (key, routine) -> (samples, busy)
        let mut cells: FastMap<(u32, u32), (u64, u64)> = FastMap::default();
        let mut key_names: Vec<String> = Vec::new();
        match by {
            None => {
                for st in &f.stacks {
                    let e = cells
                        .entry((0, f.frames[(st.start + st.len - 1) as usize]))
                        .or_default();
                    e.0 += st.count;
                    if st.busy {
                        e.1 += st.count;
                    }
                }
            }
            Some(by) => {
                let mut keys = KeyNames::new(p, by);
                for &(si, stack) in &f.sample_stacks {
                    let s = &p.samples[si as usize];
                    let k = keys.id(s);
                    let e = cells.entry((k, leaf(stack))).or_default();
                    e.0 += s.count;
                    if s.bucket != Bucket::Idle {
                        e.1 += s.count;
                    }
                }
                key_names = keys.names;
            }
        }
        let key_of = |k: u32| by.map(|_| key_names[k as usize].clone());
        let mut rows: Vec<DcpiRow> = cells
            .iter()
            .map(|(&(k, r), &(samples, busy))| DcpiRow {
                key: key_of(k),
                procedure: f.routines[r as usize].label.clone(),
                samples,
                busy,
            })
            .collect();
        sort_rows(&mut rows);
        let mut keys = Vec::new();
        if by.is_some() {
            let mut totals: FastMap<u32, (u64, u64)> = FastMap::default();
            for (&(k, _), &(samples, busy)) in &cells {
                let e = totals.entry(k).or_default();
                e.0 += samples;
                e.1 += busy;
            }
            keys = totals
                .into_iter()
                .map(|(k, (samples, busy))| DcpiRow {
                    key: key_of(k),
                    procedure: String::new(),
                    samples,
                    busy,
                })
                .collect();
            sort_rows(&mut keys);
        }
        Ok(DcpiTable {
            by,
            keys,
            rows,
            selected: f.samples,
            profile_samples: f.profile_samples,
            profile_busy: f.profile_busy,
            period_ns: p.meta.period_ns,
            coverage: Coverage::of(p),
        })
    }

    /// `samples` as `% all`: of the exact CPU time when the profile has it (see
    /// [`crate::header`]), else of all samples.
    pub fn percent_all(&self, samples: u64) -> f64 {
        self.coverage
            .percent_all(samples, self.period_ns, self.profile_samples)
    }
}

fn sort_rows(rows: &mut [DcpiRow]) {
    rows.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.key.cmp(&b.key))
            .then_with(|| a.procedure.cmp(&b.procedure))
    });
}

/// Names of `--by` key values, interned.
struct KeyNames<'a> {
    by: ByKey,
    comms: HashMap<u32, &'a str>,
    ids: FastMap<(u8, u64, u64), u32>,
    /// Container and unit names already given an id.
    by_name: HashMap<String, u32>,
    /// Cgroup paths by id (`Profile::cgroups`).
    cgroups: HashMap<u64, &'a str>,
    names: Vec<String>,
}

impl<'a> KeyNames<'a> {
    fn new(p: &'a Profile, by: ByKey) -> Self {
        KeyNames {
            by,
            comms: p
                .processes
                .iter()
                .map(|i| (i.pid, i.comm.as_str()))
                .collect(),
            ids: FastMap::default(),
            by_name: HashMap::new(),
            cgroups: p.cgroups.iter().map(|c| (c.id, c.path.as_str())).collect(),
            names: Vec::new(),
        }
    }

    fn id(&mut self, s: &SampleGroup) -> u32 {
        let b = s.bucket as u8;
        let key = match self.by {
            ByKey::Process => (b, u64::from(s.pid), 0),
            ByKey::Thread => (b, u64::from(s.pid), u64::from(s.tid)),
            ByKey::Bucket => (b, 0, 0),
            ByKey::Context => (0, context_code(s), 0),
            // Several cgroups may be one container or unit: named first, interned by name.
            ByKey::Container | ByKey::Unit => {
                let name = self.name(s);
                if let Some(&id) = self.by_name.get(&name) {
                    return id;
                }
                let id = self.names.len() as u32;
                self.by_name.insert(name.clone(), id);
                self.names.push(name);
                return id;
            }
            ByKey::Cgroup => (0, s.cgroup_id, 0),
        };
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let name = self.name(s);
        let id = self.names.len() as u32;
        self.names.push(name);
        self.ids.insert(key, id);
        id
    }

    fn name(&self, s: &SampleGroup) -> String {
        let comm = |pid: u32| self.comms.get(&pid).copied().unwrap_or(&s.comm);
        match (self.by, s.bucket) {
            (ByKey::Process | ByKey::Thread, Bucket::Kernel) => "KERNEL".into(),
            (ByKey::Process | ByKey::Thread, Bucket::Idle) => "IDLE".into(),
            (ByKey::Process, b) => format!("{}{} {}", other(b), s.pid, comm(s.pid)),
            (ByKey::Thread, b) => format!("{}{}/{} {}", other(b), s.pid, s.tid, s.comm),
            (ByKey::Bucket, b) => bucket_name(b).to_uppercase(),
            (ByKey::Context, _) => context_name(s.context),
            (ByKey::Cgroup, _) if s.cgroup_id == 0 => "cgroup unknown".into(),
            (ByKey::Cgroup, _) => match self.cgroups.get(&s.cgroup_id) {
                Some(path) => format!("cgroup {path}"),
                None => format!("cgroup {}", s.cgroup_id),
            },
            (ByKey::Container, _) => match self.cgroups.get(&s.cgroup_id) {
                Some(path) => CgroupLabels::parse(path)
                    .container_name()
                    .unwrap_or_else(|| "no container".into()),
                None => "container unknown".into(),
            },
            (ByKey::Unit, _) => match self.cgroups.get(&s.cgroup_id) {
                Some(path) => CgroupLabels::parse(path)
                    .unit
                    .unwrap_or_else(|| "no unit".into()),
                None => "unit unknown".into(),
            },
        }
    }
}

fn other(b: Bucket) -> &'static str {
    if b == Bucket::Other {
        "OTHER "
    } else {
        ""
    }
}

fn context_code(s: &SampleGroup) -> u64 {
    use pkprof_profile::Context::*;
    match s.context {
        User => 0,
        Syscall => 1,
        KernelTask => 2,
        Kworker => 3,
        HardIrq => 4,
        SoftIrq(v) => 16 + u64::from(v),
        Idle => 5,
    }
}

/// Writes the DCPI table of the samples `sel` selects from `p`.
pub fn write_dcpi(p: &Profile, sel: &Selection, out: &mut dyn Write) -> Result<(), ReportError> {
    let t = DcpiTable::build(p, sel)?;
    let mut s = String::new();
    let period = t.period_ns as f64 / 1e9;
    s.push_str(&format!(
        "DCPI profile: {} samples of {} s ({:.2} CPU seconds); {} outside the IDLE bucket\n",
        t.profile_samples,
        fmt_g(period),
        t.profile_samples as f64 * period,
        t.profile_busy
    ));
    let c = &p.meta.cpu_time;
    if c.total_ns > 0 {
        let busy = c.total_ns.saturating_sub(c.idle_ns);
        s.push_str(&format!(
            "exact CPU time (accounting): {:.2} s; processes {:.2}%, other {:.2}%, kernel {:.2}%, idle {:.2}% of all; processes {:.2}% of non-idle\n",
            c.total_ns as f64 / 1e9,
            percent(c.processes_ns, c.total_ns),
            percent(c.other_ns, c.total_ns),
            percent(c.kernel_ns, c.total_ns),
            percent(c.idle_ns, c.total_ns),
            percent(c.processes_ns, busy),
        ));
    }
    if let Some(f) = sel.filters_text() {
        s.push_str(&format!(
            "filters {f}: {} samples, {:.2}% of all\n",
            t.selected,
            t.percent_all(t.selected)
        ));
    }
    for n in notes(p) {
        s.push_str(&n);
        s.push('\n');
    }
    s.push_str(&t.coverage.all_text());
    s.push_str("; % non-idle: of the samples outside the IDLE bucket\n");
    out.write_all(s.as_bytes())?;
    let mut hidden = 0;
    if let Some(by) = t.by {
        writeln!(out, "\nby {}:", by.name())?;
        hidden += write_rows(&t, &t.keys, sel.min_percent, by.name(), out)?;
    }
    writeln!(out)?;
    hidden += write_rows(&t, &t.rows, sel.min_percent, "procedure", out)?;
    if hidden > 0 {
        writeln!(
            out,
            "\n{hidden} row{} under {}% of all not shown.",
            if hidden == 1 { "" } else { "s" },
            sel.min_percent
        )?;
    }
    Ok(())
}

/// Prints rows (a key table when the procedure is empty); returns how many were under `min`.
fn write_rows(
    t: &DcpiTable,
    rows: &[DcpiRow],
    min: f64,
    last: &str,
    out: &mut dyn Write,
) -> Result<usize, ReportError> {
    let with_key = t.by.is_some() && last == "procedure";
    let key_width = if with_key {
        rows.iter()
            .filter_map(|r| r.key.as_deref())
            .map(|k| k.chars().count())
            .chain([t.by.map_or(0, |b| b.name().len())])
            .max()
            .unwrap_or(0)
    } else {
        0
    };
    let mut s = String::new();
    s.push_str(&format!(
        "{:>9} {:>8} {:>11} {:>8}  ",
        "samples", "% all", "% non-idle", "cum %"
    ));
    if with_key {
        let name = t.by.map_or("", |b| b.name());
        s.push_str(&format!("{name:<key_width$}  "));
    }
    s.push_str(last);
    s.push('\n');
    let mut cum = 0u64;
    let mut hidden = 0;
    for r in rows {
        let pct = t.percent_all(r.samples);
        if pct < min {
            hidden += 1;
            continue;
        }
        cum += r.samples;
        s.push_str(&format!("{:>9} {:>7.2}%", r.samples, pct));
        if r.busy > 0 {
            s.push_str(&format!(" {:>10.2}%", percent(r.busy, t.profile_busy)));
        } else {
            s.push_str(&format!(" {:>11}", ""));
        }
        s.push_str(&format!(" {:>7.2}%  ", t.percent_all(cum)));
        if with_key {
            let key = r.key.as_deref().unwrap_or("");
            let pad = key_width - key.chars().count();
            s.push_str(key);
            s.push_str(&" ".repeat(pad + 2));
        }
        s.push_str(if r.procedure.is_empty() {
            r.key.as_deref().unwrap_or("")
        } else {
            &r.procedure
        });
        s.push('\n');
        if s.len() > 1 << 16 {
            out.write_all(s.as_bytes())?;
            s.clear();
        }
    }
    out.write_all(s.as_bytes())?;
    Ok(hidden)
}
