//! What a report looks at: filters on samples (PID, command, bucket) and frames (kernel or user
//! side only), `--group NAME=REGEX` groups that fold matching routines into one, the `--by` key of
//! DCPI tables, the naming style and `--min-percent`.
//!
//! [`SelectOptions`] is the plain data the CLI fills in; [`Selection::new`] checks it against the
//! profiles (a PID must be in one of them, regular expressions must compile) and compiles it. The
//! text reports read a profile through a selection; exporters get [`Selection::apply`]'s filtered
//! copy of the profile.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use pkprof_profile::{Bucket, Frame, FrameKind, Profile, SampleGroup, Stack};
use regex::Regex;

pub use crate::names::{bucket_name, context_name, softirq_name};
use crate::names::{frame_label, NameStyle};
use crate::ReportError;

/// Which frames of each stack are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrameFilter {
    #[default]
    All,
    /// Kernel frames and syscall-boundary frames (`PIDk:`).
    KernelOnly,
    /// User frames (`PIDu:`).
    UserOnly,
}

/// The key `--by` splits DCPI tables by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByKey {
    Process,
    Thread,
    Bucket,
    Context,
    Cgroup,
    /// The container (runtime and id) parsed from the served thread's cgroup path.
    Container,
    /// The systemd unit parsed from the served thread's cgroup path.
    Unit,
}

impl ByKey {
    pub const NAMES: [&'static str; 7] = [
        "process",
        "thread",
        "bucket",
        "context",
        "cgroup",
        "container",
        "unit",
    ];

    pub fn name(self) -> &'static str {
        match self {
            ByKey::Process => "process",
            ByKey::Thread => "thread",
            ByKey::Bucket => "bucket",
            ByKey::Context => "context",
            ByKey::Cgroup => "cgroup",
            ByKey::Container => "container",
            ByKey::Unit => "unit",
        }
    }
}

impl std::str::FromStr for ByKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "process" => ByKey::Process,
            "thread" => ByKey::Thread,
            "bucket" => ByKey::Bucket,
            "context" => ByKey::Context,
            "cgroup" => ByKey::Cgroup,
            "container" => ByKey::Container,
            "unit" => ByKey::Unit,
            _ => {
                return Err(format!(
                    "unknown key {s:?} (known: {})",
                    ByKey::NAMES.join(", ")
                ))
            }
        })
    }
}

/// `process`, `other`, `kernel` or `idle`.
pub fn parse_bucket(s: &str) -> Result<Bucket, String> {
    Ok(match s {
        "process" => Bucket::Process,
        "other" => Bucket::Other,
        "kernel" => Bucket::Kernel,
        "idle" => Bucket::Idle,
        _ => {
            return Err(format!(
                "unknown bucket {s:?} (known: process, other, kernel, idle)"
            ))
        }
    })
}

/// Filters and grouping as the user gave them.
#[derive(Clone, Debug, Default)]
pub struct SelectOptions {
    /// Only samples served to these processes (empty: all).
    pub pids: Vec<u32>,
    /// Only samples whose command matches this regular expression.
    pub comm: Option<String>,
    /// Only samples in these buckets (empty: all).
    pub buckets: Vec<Bucket>,
    pub frames: FrameFilter,
    /// Rows and entries under this percentage are left out of the text reports.
    pub min_percent: f64,
    /// `NAME=REGEX` specs, in order (a routine joins the first group whose regex matches its name).
    pub groups: Vec<String>,
    pub by: Option<ByKey>,
    pub names: NameStyle,
}

/// A `--group NAME=REGEX`: routines whose name (as printed: labelled or plain) matches REGEX are
/// folded into one routine named NAME.
#[derive(Clone, Debug)]
pub struct Group {
    pub name: String,
    pub regex: Regex,
}

impl Group {
    pub fn parse(spec: &str) -> Result<Group, ReportError> {
        let bad = |reason: String| ReportError::BadGroup {
            spec: spec.to_string(),
            reason,
        };
        let (name, re) = spec
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=REGEX".into()))?;
        if name.trim().is_empty() {
            return Err(bad("the group name is empty".into()));
        }
        if re.is_empty() {
            return Err(bad("the regular expression is empty".into()));
        }
        let regex = Regex::new(re).map_err(|e| bad(regex_error(&e)))?;
        Ok(Group {
            name: name.to_string(),
            regex,
        })
    }
}

/// A regex error on one line (the crate's message draws a caret diagram over several).
fn regex_error(e: &regex::Error) -> String {
    let text = e.to_string();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // "regex parse error:", the pattern, the caret line, "error: what"
    match lines.iter().rev().find(|l| l.starts_with("error:")) {
        Some(what) => format!(
            "invalid regular expression ({})",
            what.trim_start_matches("error:").trim()
        ),
        None => format!("invalid regular expression ({})", lines.join(" ")),
    }
}

/// Compiled, checked filters.
#[derive(Clone, Debug)]
pub struct Selection {
    pids: Option<HashSet<u32>>,
    comm: Option<Regex>,
    buckets: Option<[bool; 4]>,
    pub frames: FrameFilter,
    pub min_percent: f64,
    pub groups: Vec<Group>,
    pub by: Option<ByKey>,
    pub names: NameStyle,
    description: Vec<String>,
}

fn bucket_index(b: Bucket) -> usize {
    match b {
        Bucket::Process => 0,
        Bucket::Other => 1,
        Bucket::Kernel => 2,
        Bucket::Idle => 3,
    }
}

impl Default for Selection {
    /// Everything, labelled names, no groups.
    fn default() -> Self {
        Selection {
            pids: None,
            comm: None,
            buckets: None,
            frames: FrameFilter::All,
            min_percent: 0.0,
            groups: Vec::new(),
            by: None,
            names: NameStyle::Labelled,
            description: Vec::new(),
        }
    }
}

impl Selection {
    /// Compiles `opts`, checking every PID against `profiles` (it must appear in one of them, as a
    /// sampled or recorded process).
    pub fn new(opts: &SelectOptions, profiles: &[&Profile]) -> Result<Selection, ReportError> {
        let mut description = Vec::new();
        let pids = if opts.pids.is_empty() {
            None
        } else {
            for &pid in &opts.pids {
                let known = profiles.iter().any(|p| {
                    p.processes.iter().any(|i| i.pid == pid)
                        || p.samples
                            .iter()
                            .any(|s| s.pid == pid && s.bucket != Bucket::Idle)
                });
                if !known {
                    return Err(ReportError::Selection(format!(
                        "PID {pid} is not in the profile{} ({})",
                        if profiles.len() > 1 { "s" } else { "" },
                        known_pids(profiles)
                    )));
                }
            }
            let list: Vec<String> = opts.pids.iter().map(u32::to_string).collect();
            description.push(format!("-p {}", list.join(",")));
            Some(opts.pids.iter().copied().collect())
        };
        let comm = match &opts.comm {
            None => None,
            Some(re) => {
                description.push(format!("--comm {re:?}"));
                Some(Regex::new(re).map_err(|e| {
                    ReportError::Selection(format!("--comm {re:?}: {}", regex_error(&e)))
                })?)
            }
        };
        let buckets = if opts.buckets.is_empty() {
            None
        } else {
            let mut keep = [false; 4];
            for b in &opts.buckets {
                keep[bucket_index(*b)] = true;
            }
            let names: Vec<&str> = opts.buckets.iter().map(|b| bucket_name(*b)).collect();
            description.push(format!("--bucket {}", names.join(",")));
            Some(keep)
        };
        match opts.frames {
            FrameFilter::All => {}
            FrameFilter::KernelOnly => description.push("--kernel-only".into()),
            FrameFilter::UserOnly => description.push("--user-only".into()),
        }
        if !opts.min_percent.is_finite() || !(0.0..=100.0).contains(&opts.min_percent) {
            return Err(ReportError::Selection(format!(
                "--min-percent {}: must be between 0 and 100",
                opts.min_percent
            )));
        }
        let groups = opts
            .groups
            .iter()
            .map(|g| Group::parse(g))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Selection {
            pids,
            comm,
            buckets,
            frames: opts.frames,
            min_percent: opts.min_percent,
            groups,
            by: opts.by,
            names: opts.names,
            description,
        })
    }

    /// The sample filters in force, as given (`-p 12 --comm "^srv"`), or `None`.
    pub fn filters_text(&self) -> Option<String> {
        (!self.description.is_empty()).then(|| self.description.join(" "))
    }

    /// Does a sample filter (PID, command, bucket) or frame filter apply?
    pub fn filters_samples(&self) -> bool {
        self.pids.is_some()
            || self.comm.is_some()
            || self.buckets.is_some()
            || self.frames != FrameFilter::All
    }

    /// A predicate over the samples of one profile; remembers each command's match.
    pub fn sample_filter(&self) -> impl FnMut(&SampleGroup) -> bool + '_ {
        let mut comm_cache: HashMap<String, bool> = HashMap::new();
        move |s: &SampleGroup| {
            if let Some(pids) = &self.pids {
                if !pids.contains(&s.pid) || s.bucket == Bucket::Idle {
                    return false;
                }
            }
            if let Some(keep) = &self.buckets {
                if !keep[bucket_index(s.bucket)] {
                    return false;
                }
            }
            if let Some(re) = &self.comm {
                if let Some(&hit) = comm_cache.get(&s.comm) {
                    return hit;
                }
                let hit = re.is_match(&s.comm);
                comm_cache.insert(s.comm.clone(), hit);
                return hit;
            }
            true
        }
    }

    pub fn keep_frame(&self, f: &Frame) -> bool {
        match self.frames {
            FrameFilter::All => true,
            FrameFilter::KernelOnly => !matches!(
                f.kind,
                FrameKind::User | FrameKind::Truncated | FrameKind::Python
            ),
            // The `[truncated]` mark belongs to the user part.
            FrameFilter::UserOnly => matches!(
                f.kind,
                FrameKind::User | FrameKind::Truncated | FrameKind::Python
            ),
        }
    }

    /// The group a routine named `label` joins, if any.
    pub fn group_of(&self, label: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.regex.is_match(label))
    }

    /// A copy of `p` with only the selected samples, the frame filter applied to their stacks
    /// (samples left without frames are dropped; samples recorded without a stack are kept) and
    /// grouped frames replaced by one frame named after the group (module `[group]`, consecutive
    /// repeats merged). What exporters are given. `min_percent` and `by` do not apply.
    pub fn apply(&self, p: &Profile) -> Profile {
        let mut out = Profile {
            meta: p.meta.clone(),
            processes: p.processes.clone(),
            syscalls: p.syscalls.clone(),
            func_counts: p.func_counts.clone(),
            ..Profile::default()
        };
        // Source frame, or (group, kind) for a group's frame: one new frame each.
        let mut frame_ids: HashMap<(u32, Option<(usize, FrameKind)>), u32> = HashMap::new();
        let mut stack_ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut by_key: HashMap<(u32, Bucket, u32), Option<u32>> = HashMap::new();
        let mut label_group: HashMap<(u32, Bucket, u32), Option<usize>> = HashMap::new();
        let mut keep = self.sample_filter();
        for s in &p.samples {
            if !keep(s) {
                continue;
            }
            let key = (s.stack, s.bucket, s.pid);
            let stack = *by_key.entry(key).or_insert_with(|| {
                let src = &p.stacks[s.stack as usize].frames;
                let mut frames: Vec<u32> = Vec::with_capacity(src.len());
                let mut last_group = None;
                for &f in src {
                    let frame = &p.frames[f as usize];
                    if !self.keep_frame(frame) {
                        continue;
                    }
                    let group = if self.groups.is_empty() {
                        None
                    } else {
                        *label_group.entry((f, s.bucket, s.pid)).or_insert_with(|| {
                            self.group_of(&frame_label(s.pid, s.bucket, frame, self.names))
                        })
                    };
                    if group.is_some() && group == last_group {
                        continue;
                    }
                    last_group = group;
                    let key = match group {
                        None => (f, None),
                        Some(g) => (u32::MAX, Some((g, frame.kind))),
                    };
                    let id = *frame_ids.entry(key).or_insert_with(|| {
                        let new = match group {
                            None => frame.clone(),
                            Some(g) => Frame {
                                kind: frame.kind,
                                name: self.groups[g].name.clone(),
                                module: "[group]".into(),
                                symbolized: true,
                                ..Frame::default()
                            },
                        };
                        out.frames.push(new);
                        (out.frames.len() - 1) as u32
                    });
                    frames.push(id);
                }
                if frames.is_empty() && !src.is_empty() {
                    return None;
                }
                let next = out.stacks.len() as u32;
                let id = *stack_ids.entry(frames.clone()).or_insert(next);
                if id == next {
                    out.stacks.push(Stack { frames });
                }
                Some(id)
            });
            if let Some(stack) = stack {
                out.samples.push(SampleGroup { stack, ..s.clone() });
            }
        }
        out
    }
}

fn known_pids(profiles: &[&Profile]) -> String {
    let mut pids: Vec<u32> = profiles
        .iter()
        .flat_map(|p| {
            p.processes.iter().map(|i| i.pid).chain(
                p.samples
                    .iter()
                    .filter(|s| matches!(s.bucket, Bucket::Process | Bucket::Other))
                    .map(|s| s.pid),
            )
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    if pids.is_empty() {
        return "it has no processes".into();
    }
    let mut text = String::from("its PIDs: ");
    for (i, pid) in pids.iter().take(12).enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        let _ = write!(text, "{pid}");
    }
    if pids.len() > 12 {
        let _ = write!(text, " and {} more", pids.len() - 12);
    }
    text
}
