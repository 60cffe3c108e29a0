//! Labelled samples before symbolization: raw address stacks interned once, and sample counts per
//! (stack, labels). Keeps memory proportional to distinct stacks, not to samples.

use std::collections::HashMap;

use pkprof_attribution::{SampleContext, Served, Truncation};
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

    pub fn add(&mut self, stack: RawStack, labels: Labels) {
        let (max_stacks, max_groups) = self.limits.unwrap_or((usize::MAX, usize::MAX));
        let id = match self.stack_ids.get(&stack) {
            Some(id) => *id,
            None if self.stacks.len() >= max_stacks => {
                self.dropped += 1;
                return;
            }
            None => {
                let id = self.stacks.len() as u32;
                self.stacks.push(stack.clone());
                self.stack_ids.insert(stack, id);
                id
            }
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

    pub fn stacks(&self) -> &[RawStack] {
        &self.stacks
    }

    pub fn groups(&self) -> impl Iterator<Item = (u32, &Labels, u64)> {
        self.groups.iter().map(|((id, l), n)| (*id, l, *n))
    }
}
