//! Labelled samples before symbolization: raw address stacks interned once, and sample counts per
//! (stack, labels). Keeps memory proportional to distinct stacks, not to samples.

use std::collections::HashMap;

use pkprof_attribution::{BlockReason, SampleContext, Served, Truncation};
use pkprof_profile::{Bucket, Frame};

use crate::python::PyFrameRef;

/// A raw stack: the process whose user addresses these are, and both parts, leaf first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RawStack {
    pub user_pid: u32,
    pub ustack: Vec<u64>,
    pub kstack: Vec<u64>,
    /// Why the user stack stops before the thread's entry (None: it reached it).
    pub end: Option<Truncation>,
    /// The thread's CPython frames, leaf first (docs/design.md, "Python frames").
    pub python: Vec<PyFrameRef>,
}

/// The labels a sample group carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Labels {
    pub served: Option<Served>,
    pub current_pid: u32,
    pub current_comm: String,
    pub bucket: Bucket,
    pub context: SampleContext,
    /// Task context in kernel mode: the syscall number, when the task was in a syscall.
    pub syscall: Option<u32>,
}

/// One entry of an off-CPU sample's wake chain, as a label (its blocked time is summed apart).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WakeLabel {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub context: SampleContext,
    /// A kernel thread: its task context is no system call.
    pub kthread: bool,
    pub blocked: Option<BlockReason>,
}

/// The labels an off-CPU group carries (`record --off-cpu`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OffLabels {
    pub labels: Labels,
    pub reason: BlockReason,
    /// Raw stack id of the waker's stacks.
    pub waker_stack: Option<u32>,
    pub chain: Vec<WakeLabel>,
}

/// Sums of one off-CPU group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffSums {
    pub count: u64,
    pub weight_ns: u64,
    /// Per chain entry, the blocked time of that waker before its wakeup.
    pub chain_blocked_ns: Vec<u64>,
}

#[derive(Default)]
pub struct Aggregate {
    stacks: Vec<RawStack>,
    stack_ids: HashMap<RawStack, u32>,
    groups: HashMap<(u32, Labels), u64>,
    /// Most distinct stacks and groups kept (None: unbounded, as `record` keeps them).
    limits: Option<(usize, usize)>,
    /// Samples not kept because a limit was reached.
    dropped: u64,
    /// Python frames, named while their processes lived (ids of [`PyFrameRef`]).
    python: Vec<Frame>,
    python_ids: HashMap<Frame, u32>,
    off_groups: HashMap<(u32, OffLabels), OffSums>,
}

impl Aggregate {
    /// An aggregate keeping at most `limits` = (distinct stacks, groups); None: unbounded.
    pub fn bounded(limits: Option<(usize, usize)>) -> Self {
        Aggregate {
            limits,
            ..Aggregate::default()
        }
    }

    pub fn limits(&self) -> Option<(usize, usize)> {
        self.limits
    }

    /// Samples not kept because a limit was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// The id of a raw stack, interned; None when the stack limit is reached (the caller counts
    /// what it could not keep).
    pub fn stack_id(&mut self, stack: RawStack) -> Option<u32> {
        let max_stacks = self.limits.map_or(usize::MAX, |l| l.0);
        Some(match self.stack_ids.get(&stack) {
            Some(id) => *id,
            None if self.stacks.len() >= max_stacks => return None,
            None => {
                let id = self.stacks.len() as u32;
                self.stacks.push(stack.clone());
                self.stack_ids.insert(stack, id);
                id
            }
        })
    }

    pub fn add(&mut self, stack: RawStack, labels: Labels) {
        let max_groups = self.limits.map_or(usize::MAX, |l| l.1);
        let Some(id) = self.stack_id(stack) else {
            self.dropped += 1;
            return;
        };
        let key = (id, labels);
        if let Some(n) = self.groups.get_mut(&key) {
            *n += 1;
        } else if self.groups.len() >= max_groups {
            self.dropped += 1;
        } else {
            self.groups.insert(key, 1);
        }
    }

    /// The id of a named Python frame.
    pub fn python_frame(&mut self, f: Frame) -> u32 {
        if let Some(id) = self.python_ids.get(&f) {
            return *id;
        }
        let id = self.python.len() as u32;
        self.python.push(f.clone());
        self.python_ids.insert(f, id);
        id
    }

    pub fn python_frames(&self) -> &[Frame] {
        &self.python
    }

    /// One off-CPU sample of `weight_ns`, blocked in `stack`; `chain_blocked_ns[i]` is how long
    /// chain entry i had been blocked itself.
    pub fn add_off(
        &mut self,
        stack: RawStack,
        labels: OffLabels,
        weight_ns: u64,
        chain_blocked_ns: &[u64],
    ) {
        let max_groups = self.limits.map_or(usize::MAX, |l| l.1);
        let Some(id) = self.stack_id(stack) else {
            self.dropped += 1;
            return;
        };
        let key = (id, labels);
        if !self.off_groups.contains_key(&key) && self.off_groups.len() >= max_groups {
            self.dropped += 1;
            return;
        }
        let sums = self.off_groups.entry(key).or_default();
        sums.count += 1;
        sums.weight_ns += weight_ns;
        if sums.chain_blocked_ns.len() < chain_blocked_ns.len() {
            sums.chain_blocked_ns.resize(chain_blocked_ns.len(), 0);
        }
        for (sum, ns) in sums.chain_blocked_ns.iter_mut().zip(chain_blocked_ns) {
            *sum += ns;
        }
    }

    pub fn off_groups(&self) -> impl Iterator<Item = (u32, &OffLabels, &OffSums)> {
        self.off_groups.iter().map(|((id, l), s)| (*id, l, s))
    }

    pub fn stacks(&self) -> &[RawStack] {
        &self.stacks
    }

    pub fn groups(&self) -> impl Iterator<Item = (u32, &Labels, u64)> {
        self.groups.iter().map(|((id, l), n)| (*id, l, *n))
    }
}
