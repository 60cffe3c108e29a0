//! From labelled samples to routine stacks: each frame of a selected sample becomes a routine (its
//! label, or the `--group` it joins), and the samples are summed per distinct routine stack so
//! that every later pass handles each stack once.
//!
//! Exact call counts are attached here too: a routine's `calls` is known when every frame folded
//! into it is a syscall-boundary frame (`PIDk:sys_NAME`, counted by `profile.syscalls`) or a
//! uprobe-counted user function (`profile.func_counts`) of a process, and every such (PID, name)
//! has a count; it is then the sum over those (PID, name). Anything else leaves it unknown.
//! Counted (PID, name)s that no selected sample reached become routines too, without samples
//! (see [`crate::counts`]), so every exact count is shown whether or not it was sampled.

use std::collections::{HashMap, HashSet};

use pkprof_profile::{Bucket, FrameKind, Profile, SampleGroup};

use crate::counts::counted;
use crate::names::{frame_label, NameStyle};
use crate::select::Selection;
use crate::stacks::{name_stacks, sum_by_stack};
use crate::FastMap;

/// Exact call count of a routine while it is being built.
#[derive(Clone, Debug)]
enum Calls {
    Exact { sum: u64, pids: Vec<u32> },
    Unknown,
}

/// A routine: what one report line is about.
#[derive(Clone, Debug)]
pub(crate) struct RoutineInfo {
    pub label: String,
    pub group: bool,
    calls: Calls,
}

impl RoutineInfo {
    pub fn calls(&self) -> Option<u64> {
        match &self.calls {
            Calls::Exact { sum, .. } => Some(*sum),
            Calls::Unknown => None,
        }
    }
}

/// One distinct routine stack (root first) with the samples that had it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FoldedStack {
    pub start: u32,
    pub len: u32,
    pub count: u64,
    /// The samples were outside the IDLE bucket.
    pub busy: bool,
}

pub(crate) struct Folded {
    pub routines: Vec<RoutineInfo>,
    pub stacks: Vec<FoldedStack>,
    /// Routine ids of every stack, concatenated.
    pub frames: Vec<u32>,
    /// For each selected sample (index into `profile.samples`), its folded stack; only when asked.
    pub sample_stacks: Vec<(u32, u32)>,
    /// Samples selected, and those of them outside the IDLE bucket.
    pub samples: u64,
    pub busy: u64,
    /// Every sample of the profile, and those outside the IDLE bucket (before any filter).
    pub profile_samples: u64,
    pub profile_busy: u64,
}

impl Folded {
    pub fn stack(&self, s: &FoldedStack) -> &[u32] {
        &self.frames[s.start as usize..(s.start + s.len) as usize]
    }
}

/// Exact counts by (PID, name): syscalls by name without `sys_`, functions by name.
struct ExactCounts<'a> {
    syscalls: HashMap<(u32, &'a str), u64>,
    functions: HashMap<(u32, &'a str), u64>,
}

impl<'a> ExactCounts<'a> {
    fn new(p: &'a Profile) -> Self {
        let mut syscalls = HashMap::new();
        for s in &p.syscalls {
            let e: &mut u64 = syscalls.entry((s.pid, s.name.as_str())).or_default();
            *e = e.saturating_add(s.count);
        }
        let mut functions = HashMap::new();
        for f in &p.func_counts {
            let e: &mut u64 = functions.entry((f.pid, f.function.as_str())).or_default();
            *e = e.saturating_add(f.count);
        }
        ExactCounts {
            syscalls,
            functions,
        }
    }
}

struct Interner<'a> {
    p: &'a Profile,
    sel: &'a Selection,
    exact: ExactCounts<'a>,
    routines: Vec<RoutineInfo>,
    by_label: HashMap<String, u32>,
    by_frame: FastMap<(u32, Bucket, u32), u32>,
    /// Counted (syscall?, PID, frame name)s already joined to a routine.
    joined: HashSet<(bool, u32, String)>,
}

impl Interner<'_> {
    /// The routine of frame `f` (or `None`: a sample without a stack) in sample `s`.
    fn routine(&mut self, f: Option<u32>, s: &SampleGroup) -> u32 {
        let key = (f.unwrap_or(u32::MAX), s.bucket, s.pid);
        if let Some(&r) = self.by_frame.get(&key) {
            return r;
        }
        let (label, exact) = match f {
            Some(f) => {
                let frame = &self.p.frames[f as usize];
                let label = frame_label(s.pid, s.bucket, frame, self.sel.names);
                let exact = match (s.bucket, frame.kind) {
                    (Bucket::Process | Bucket::Other, FrameKind::Syscall) => frame
                        .name
                        .strip_prefix("sys_")
                        .and_then(|n| self.exact.syscalls.get(&(s.pid, n)).copied()),
                    (Bucket::Process | Bucket::Other, FrameKind::User) => self
                        .exact
                        .functions
                        .get(&(s.pid, frame.name.as_str()))
                        .copied(),
                    _ => None,
                };
                (label, exact)
            }
            None => (no_stack_label(s, self.sel.names), None),
        };
        if exact.is_some() {
            if let Some(f) = f {
                let frame = &self.p.frames[f as usize];
                self.joined
                    .insert((frame.kind == FrameKind::Syscall, s.pid, frame.name.clone()));
            }
        }
        let r = self.join(label, s.pid, exact);
        self.by_frame.insert(key, r);
        r
    }

    /// The routine named `label` (or the `--group` it joins), with the exact count `exact` of
    /// process `pid` added once per PID; a frame without a count makes the calls unknown.
    fn join(&mut self, label: String, pid: u32, exact: Option<u64>) -> u32 {
        let (label, group) = match self.sel.group_of(&label) {
            Some(g) => (self.sel.groups[g].name.clone(), true),
            None => (label, false),
        };
        let r = match self.by_label.get(&label) {
            Some(&r) => r,
            None => {
                let r = self.routines.len() as u32;
                self.by_label.insert(label.clone(), r);
                self.routines.push(RoutineInfo {
                    label,
                    group,
                    calls: Calls::Exact {
                        sum: 0,
                        pids: Vec::new(),
                    },
                });
                r
            }
        };
        let info = &mut self.routines[r as usize];
        info.calls = match (std::mem::replace(&mut info.calls, Calls::Unknown), exact) {
            (Calls::Exact { sum, mut pids }, Some(n)) if !group => {
                if !pids.contains(&pid) {
                    pids.push(pid);
                    Calls::Exact {
                        sum: sum.saturating_add(n),
                        pids,
                    }
                } else {
                    Calls::Exact { sum, pids }
                }
            }
            _ => Calls::Unknown,
        };
        r
    }

    /// Routines for the counted (PID, name)s no selected sample reached, as the selection's
    /// filters allow (PID, command, bucket; frame side).
    fn add_unsampled_counts(&mut self) {
        let (p, sel) = (self.p, self.sel);
        let mut keep = sel.sample_filter();
        for c in counted(p) {
            let key = (
                c.frame.kind == FrameKind::Syscall,
                c.pid,
                c.frame.name.clone(),
            );
            if self.joined.contains(&key) || !sel.keep_frame(&c.frame) {
                continue;
            }
            let probe = SampleGroup {
                pid: c.pid,
                tid: c.pid,
                comm: c.comm.to_string(),
                bucket: c.bucket,
                ..SampleGroup::default()
            };
            if !keep(&probe) {
                continue;
            }
            // The sum over the PID's rows of that name, as for sampled frames.
            let exact = if key.0 {
                let name = c.frame.name.strip_prefix("sys_").unwrap_or(&c.frame.name);
                self.exact.syscalls.get(&(c.pid, name)).copied()
            } else {
                self.exact
                    .functions
                    .get(&(c.pid, c.frame.name.as_str()))
                    .copied()
            };
            let label = frame_label(c.pid, c.bucket, &c.frame, sel.names);
            self.join(label, c.pid, exact);
            self.joined.insert(key);
        }
    }
}

/// The name of the routine standing for a sample recorded without any frame.
fn no_stack_label(s: &SampleGroup, names: NameStyle) -> String {
    match (names, s.bucket) {
        (NameStyle::Plain, _) => "[no stack]".into(),
        (_, Bucket::Process) => format!("{}:[no stack]", s.pid),
        (_, Bucket::Other) => "OTHER:[no stack]".into(),
        (_, Bucket::Kernel) => "KERNEL:[no stack]".into(),
        (_, Bucket::Idle) => "IDLE:[no stack]".into(),
    }
}

/// Folds the selected samples of `p` into routine stacks ([`crate::stacks`]: summed per stack and
/// (bucket, PID), which decide every frame's label and exact count). `per_sample`: also record
/// which folded stack each selected sample went to (for `--by` tables).
pub(crate) fn fold(p: &Profile, sel: &Selection, per_sample: bool) -> Folded {
    let mut it = Interner {
        p,
        sel,
        exact: ExactCounts::new(p),
        routines: Vec::new(),
        by_label: HashMap::new(),
        by_frame: FastMap::default(),
        joined: HashSet::new(),
    };
    let mut out = Folded {
        routines: Vec::new(),
        stacks: Vec::new(),
        frames: Vec::new(),
        sample_stacks: Vec::new(),
        samples: 0,
        busy: 0,
        profile_samples: 0,
        profile_busy: 0,
    };

    let mut keep = sel.sample_filter();
    let sums = sum_by_stack(
        p,
        |s| {
            out.profile_samples = out.profile_samples.saturating_add(s.count);
            if s.bucket != Bucket::Idle {
                out.profile_busy = out.profile_busy.saturating_add(s.count);
            }
            keep(s)
        },
        |s| (s.bucket, s.pid),
        per_sample,
    );
    let mut folded_of = vec![u32::MAX; sums.pairs.len()];
    name_stacks(
        p,
        &sums,
        |f, s| match f {
            Some(f) if !sel.keep_frame(&p.frames[f as usize]) => None,
            f => {
                let r = it.routine(f, s);
                Some((r, it.routines[r as usize].group))
            }
        },
        |pi, stack| {
            let pair = &sums.pairs[pi];
            let count = u64::try_from(pair.count).unwrap_or(u64::MAX);
            let busy = p.samples[pair.first as usize].bucket != Bucket::Idle;
            folded_of[pi] = out.stacks.len() as u32;
            out.stacks.push(FoldedStack {
                start: out.frames.len() as u32,
                len: stack.len() as u32,
                count,
                busy,
            });
            out.frames.extend_from_slice(stack);
            out.samples = out.samples.saturating_add(count);
            if busy {
                out.busy = out.busy.saturating_add(count);
            }
        },
    );
    it.add_unsampled_counts();
    if per_sample {
        out.sample_stacks = sums
            .sample_pairs
            .into_iter()
            .filter_map(|(i, pair)| {
                let f = folded_of[pair as usize];
                (f != u32::MAX).then_some((i, f))
            })
            .collect();
    }
    out.routines = it.routines;
    out
}
