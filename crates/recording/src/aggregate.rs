//! Labelled samples before symbolization: raw address stacks interned once, and sample counts per
//! (stack, labels). Keeps memory proportional to distinct stacks, not to samples.

use std::collections::HashMap;

use pkprof_attribution::{BlockReason, SampleContext, Served, Truncation};
use pkprof_profile::Bucket;

/// A raw stack: the process whose user addresses these are, and both parts, leaf first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RawStack {
    pub user_pid: u32,
    pub ustack: Vec<u64>,
    pub kstack: Vec<u64>,
    /// Why the user stack stops before the thread's entry (None: it reached it).
    pub end: Option<Truncation>,
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
    off_groups: HashMap<(u32, OffLabels), OffSums>,
}

impl Aggregate {
    /// The id of a raw stack, interned.
    pub fn stack_id(&mut self, stack: RawStack) -> u32 {
        match self.stack_ids.get(&stack) {
            Some(id) => *id,
            None => {
                let id = self.stacks.len() as u32;
                self.stacks.push(stack.clone());
                self.stack_ids.insert(stack, id);
                id
            }
        }
    }

    pub fn add(&mut self, stack: RawStack, labels: Labels) {
        let id = self.stack_id(stack);
        *self.groups.entry((id, labels)).or_default() += 1;
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
        let id = self.stack_id(stack);
        let sums = self.off_groups.entry((id, labels)).or_default();
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
