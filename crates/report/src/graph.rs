//! The call graph measured from the sampled stacks: per routine its self samples and its total
//! (inclusive, once per stack however often it recurses), per caller -> callee arc the samples that
//! went through it, and gprof's cycles (strongly connected components).
//!
//! Everything is measured, nothing estimated from call counts as gprof must:
//! - a routine's **self** is the samples whose leaf it is; its **total** the samples whose stack it
//!   is on (once per stack);
//! - cycles are found on the arcs seen in the stacks; in each stack the routines of one cycle form
//!   one contiguous run (a routine that appears twice in a stack is on a cycle with everything
//!   between), so a stack crosses each arc between two different components at most once;
//! - such an arc P -> C carries **self** = the samples whose stack crosses it and ends in C's
//!   component (C itself when C is on no cycle), **children** = those that go on below it. The
//!   arcs into a routine thus add up to its total minus the samples where it is the root;
//! - a cycle as a whole has self = the samples ending in one of its members and children = the
//!   rest of the samples whose stack enters it; each member is shown with its own self and, as
//!   children, the samples that leave the cycle from it. Arcs inside a cycle and a routine calling
//!   itself carry no time (as in gprof).
//!
//! Each distinct routine stack is handled once with its summed count, so the cost follows the
//! number of distinct stacks, not of samples.

mod fold;
mod scc;

pub(crate) use fold::{fold, Folded};

use pkprof_profile::Profile;

use crate::format::percent;
use crate::select::Selection;
use crate::FastMap;
use crate::ReportError;

/// Index into [`CallGraph::routines`].
pub type RoutineId = u32;

#[derive(Clone, Debug)]
pub struct Routine {
    /// The name as reports print it (labelled or plain, or a group's name).
    pub label: String,
    /// A `--group`: several procedures folded into one.
    pub group: bool,
    /// Samples whose leaf is this routine, and those of them outside the IDLE bucket.
    pub self_samples: u64,
    pub self_busy: u64,
    /// Samples with this routine on the stack, once per stack.
    pub total: u64,
    /// Samples with this routine at the root of the stack.
    pub root: u64,
    /// Exact number of calls (syscall and uprobe counts), when known.
    pub calls: Option<u64>,
    /// Index into [`CallGraph::cycles`] when the routine is on a cycle.
    pub cycle: Option<usize>,
    /// For a cycle member: the samples whose stack leaves the cycle from this routine (gprof's
    /// children of a member). Otherwise `total - self_samples`.
    pub children: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArcKind {
    /// Between two components: carries time.
    Normal,
    /// A routine calling itself.
    SelfCall,
    /// Between two members of the same cycle.
    InCycle,
}

#[derive(Clone, Debug)]
pub struct CallArc {
    pub caller: RoutineId,
    pub callee: RoutineId,
    pub kind: ArcKind,
    /// Samples through the arc that end in the callee's component, and those that go on below it.
    pub self_samples: u64,
    pub child_samples: u64,
}

#[derive(Clone, Debug)]
pub struct Cycle {
    /// gprof's `<cycle N>`: numbered from 1 by decreasing total.
    pub number: u32,
    pub members: Vec<RoutineId>,
    /// Samples ending in a member; samples whose stack enters the cycle.
    pub self_samples: u64,
    pub total: u64,
    /// Callers from outside: (caller, self, children) summed over the arcs into any member.
    pub parents: Vec<(RoutineId, u64, u64)>,
    /// Samples whose stack starts inside the cycle.
    pub root: u64,
}

/// Arc indices grouped by routine (compressed rows).
#[derive(Clone, Debug, Default)]
struct Adjacency {
    start: Vec<u32>,
    arcs: Vec<u32>,
}

impl Adjacency {
    fn new(n: usize, arcs: &[CallArc], key: impl Fn(&CallArc) -> u32) -> Adjacency {
        let mut start = vec![0u32; n + 1];
        for a in arcs {
            start[key(a) as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut out = vec![0u32; arcs.len()];
        for (i, a) in arcs.iter().enumerate() {
            let k = key(a) as usize;
            out[fill[k] as usize] = i as u32;
            fill[k] += 1;
        }
        Adjacency { start, arcs: out }
    }

    fn of(&self, r: RoutineId) -> &[u32] {
        &self.arcs[self.start[r as usize] as usize..self.start[r as usize + 1] as usize]
    }
}

#[derive(Clone, Debug)]
pub struct CallGraph {
    pub routines: Vec<Routine>,
    pub arcs: Vec<CallArc>,
    pub cycles: Vec<Cycle>,
    /// Arcs into and out of each routine: see [`CallGraph::parents_of`], [`CallGraph::children_of`].
    parents: Adjacency,
    children: Adjacency,
    /// Samples selected, and those of them outside the IDLE bucket.
    pub samples: u64,
    pub busy: u64,
    /// Samples of the whole profile (before filters), and those outside the IDLE bucket.
    pub profile_samples: u64,
    pub profile_busy: u64,
    /// CPU time each sample stands for.
    pub period_ns: u64,
    /// The profile's header lines (losses, idle sampling: [`crate::header::notes`]).
    pub notes: Vec<String>,
}

impl CallGraph {
    /// Measures the call graph of the samples `sel` selects. Fails on a profile without samples,
    /// or when the filters leave none.
    pub fn build(p: &Profile, sel: &Selection) -> Result<CallGraph, ReportError> {
        check_samples(p)?;
        let folded = fold(p, sel, false);
        if folded.samples == 0 {
            return Err(no_match(sel));
        }
        let mut g = measure(&folded, p.meta.period_ns);
        g.notes = crate::header::notes(p);
        Ok(g)
    }

    /// The routine printed as `label`.
    pub fn routine(&self, label: &str) -> Option<RoutineId> {
        self.routines
            .iter()
            .position(|r| r.label == label)
            .map(|i| i as RoutineId)
    }

    /// The arc `caller` -> `callee`, by labels.
    pub fn arc(&self, caller: &str, callee: &str) -> Option<&CallArc> {
        let (a, b) = (self.routine(caller)?, self.routine(callee)?);
        self.children_of(a)
            .iter()
            .map(|&i| &self.arcs[i as usize])
            .find(|arc| arc.callee == b)
    }

    /// Indices into [`CallGraph::arcs`] of the arcs into routine `r`.
    pub fn parents_of(&self, r: RoutineId) -> &[u32] {
        self.parents.of(r)
    }

    /// Indices into [`CallGraph::arcs`] of the arcs out of routine `r`.
    pub fn children_of(&self, r: RoutineId) -> &[u32] {
        self.children.of(r)
    }

    /// Seconds of CPU time `samples` stand for.
    pub fn seconds(&self, samples: u64) -> f64 {
        samples as f64 * self.period_ns as f64 / 1e9
    }

    /// Hundredths of a second `samples` stand for, rounded half up (for `%.2f` columns printed
    /// from integers, the same in every report).
    pub fn hundredths(&self, samples: u64) -> u128 {
        (u128::from(samples) * u128::from(self.period_ns) + 5_000_000) / 10_000_000
    }

    /// `samples` as a percentage of the selected samples.
    pub fn percent(&self, samples: u64) -> f64 {
        percent(samples, self.samples)
    }
}

/// The profile has samples.
pub(crate) fn check_samples(p: &Profile) -> Result<(), ReportError> {
    if p.samples.iter().all(|s| s.count == 0) {
        return Err(ReportError::Empty(String::new()));
    }
    Ok(())
}

/// The error for filters that select nothing.
pub(crate) fn no_match(sel: &Selection) -> ReportError {
    ReportError::Empty(match sel.filters_text() {
        Some(f) => format!(" matching the filters ({f})"),
        None => " with frames".into(),
    })
}

/// The distinct arcs (caller, callee) of the stacks, grouped by caller, and the arc joining each
/// stack position to the one before it (`u32::MAX` at roots). The positions are bucketed by caller
/// (a counting sort), then each caller's callees are deduplicated with a table indexed by callee:
/// no hashing of millions of pairs.
fn arcs_of(f: &Folded, n: usize) -> (Vec<(u32, u32)>, Vec<u32>) {
    let mut start = vec![0u32; n + 1];
    for st in &f.stacks {
        for w in f.stack(st).windows(2) {
            start[w[0] as usize + 1] += 1;
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    // (callee, position) bucketed by caller
    let mut by_caller = vec![(0u32, 0u32); start[n] as usize];
    for st in &f.stacks {
        let frames = f.stack(st);
        for i in 1..frames.len() {
            let slot = &mut fill[frames[i - 1] as usize];
            by_caller[*slot as usize] = (frames[i], st.start + i as u32);
            *slot += 1;
        }
    }
    drop(fill);
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let mut arc_at = vec![u32::MAX; f.frames.len()];
    let mut seen_for = vec![u32::MAX; n];
    let mut seen_arc = vec![0u32; n];
    for caller in 0..n {
        let bucket = &by_caller[start[caller] as usize..start[caller + 1] as usize];
        for &(callee, pos) in bucket {
            let c = callee as usize;
            if seen_for[c] != caller as u32 {
                seen_for[c] = caller as u32;
                seen_arc[c] = pairs.len() as u32;
                pairs.push((caller as u32, callee));
            }
            arc_at[pos as usize] = seen_arc[c];
        }
    }
    (pairs, arc_at)
}

fn measure(f: &Folded, period_ns: u64) -> CallGraph {
    let n = f.routines.len();
    let mut routines: Vec<Routine> = f
        .routines
        .iter()
        .map(|r| Routine {
            label: r.label.clone(),
            group: r.group,
            self_samples: 0,
            self_busy: 0,
            total: 0,
            root: 0,
            calls: r.calls(),
            cycle: None,
            children: 0,
        })
        .collect();

    // Pass 1: self, total and roots.
    let mut stamp: Vec<u32> = vec![u32::MAX; n];
    for (si, st) in f.stacks.iter().enumerate() {
        let frames = f.stack(st);
        let c = st.count;
        let leaf = &mut routines[*frames.last().expect("folded stacks are not empty") as usize];
        leaf.self_samples += c;
        if st.busy {
            leaf.self_busy += c;
        }
        routines[frames[0] as usize].root += c;
        for &r in frames {
            if stamp[r as usize] != si as u32 {
                stamp[r as usize] = si as u32;
                routines[r as usize].total += c;
            }
        }
    }
    let (arc_pairs, arc_at) = arcs_of(f, n);
    // Cycles: components with more than one routine.
    let comp = scc::components(n, &arc_pairs);
    let mut size = vec![0u32; n];
    for &c in &comp {
        size[c as usize] += 1;
    }
    let mut cycle_of_comp: FastMap<u32, usize> = FastMap::default();
    let mut cycles: Vec<Cycle> = Vec::new();
    for (r, &c) in comp.iter().enumerate() {
        if size[c as usize] > 1 {
            let k = *cycle_of_comp.entry(c).or_insert_with(|| {
                cycles.push(Cycle {
                    number: 0,
                    members: Vec::new(),
                    self_samples: 0,
                    total: 0,
                    parents: Vec::new(),
                    root: 0,
                });
                cycles.len() - 1
            });
            cycles[k].members.push(r as u32);
            routines[r].cycle = Some(k);
        }
    }
    let mut arcs: Vec<CallArc> = arc_pairs
        .iter()
        .map(|&(a, b)| CallArc {
            caller: a,
            callee: b,
            kind: if a == b {
                ArcKind::SelfCall
            } else if comp[a as usize] == comp[b as usize] {
                ArcKind::InCycle
            } else {
                ArcKind::Normal
            },
            self_samples: 0,
            child_samples: 0,
        })
        .collect();

    // Pass 2: time along arcs between components, and through cycles.
    for st in &f.stacks {
        let frames = f.stack(st);
        let c = st.count;
        let mut i = 0;
        while i < frames.len() {
            // The run of frames in the component of frames[i].
            let k = comp[frames[i] as usize];
            let mut end = i + 1;
            while end < frames.len() && comp[frames[end] as usize] == k {
                end += 1;
            }
            let last_run = end == frames.len();
            if i > 0 {
                let arc = &mut arcs[arc_at[st.start as usize + i] as usize];
                if last_run {
                    arc.self_samples += c;
                } else {
                    arc.child_samples += c;
                }
            }
            if let Some(cy) = routines[frames[i] as usize].cycle {
                let cycle = &mut cycles[cy];
                cycle.total += c;
                if i == 0 {
                    cycle.root += c;
                }
                if last_run {
                    cycle.self_samples += c;
                } else {
                    routines[frames[end - 1] as usize].children += c;
                }
            }
            i = end;
        }
    }
    for r in &mut routines {
        if r.cycle.is_none() {
            r.children = r.total - r.self_samples;
        }
    }

    let parents = Adjacency::new(n, &arcs, |a| a.callee);
    let children = Adjacency::new(n, &arcs, |a| a.caller);
    for cycle in &mut cycles {
        let mut by_caller: FastMap<u32, (u64, u64)> = FastMap::default();
        for &m in &cycle.members {
            for &ai in parents.of(m) {
                let a = &arcs[ai as usize];
                if a.kind == ArcKind::Normal {
                    let e = by_caller.entry(a.caller).or_default();
                    e.0 += a.self_samples;
                    e.1 += a.child_samples;
                }
            }
        }
        cycle.parents = by_caller.into_iter().map(|(r, (s, c))| (r, s, c)).collect();
        cycle.parents.sort_unstable();
    }
    // Number cycles by decreasing total, then by their first member's name.
    let key = |c: &Cycle, routines: &[Routine]| {
        c.members
            .iter()
            .map(|&m| routines[m as usize].label.clone())
            .min()
            .unwrap_or_default()
    };
    let mut order: Vec<usize> = (0..cycles.len()).collect();
    order.sort_by(|&a, &b| {
        cycles[b]
            .total
            .cmp(&cycles[a].total)
            .then_with(|| key(&cycles[a], &routines).cmp(&key(&cycles[b], &routines)))
    });
    for (rank, &k) in order.iter().enumerate() {
        cycles[k].number = rank as u32 + 1;
    }

    CallGraph {
        routines,
        arcs,
        cycles,
        parents,
        children,
        samples: f.samples,
        busy: f.busy,
        profile_samples: f.profile_samples,
        profile_busy: f.profile_busy,
        period_ns,
        notes: Vec::new(),
    }
}
