//! The events collection delivers, in plain Rust types (collection converts the kernel records).

/// The thread a piece of work served, as the kernel's thread table knew it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Served {
    pub pid: u32,
    pub tid: u32,
    pub cgroup_id: u64,
    pub comm: String,
    /// A kernel thread: its own work is KERNEL.
    pub kthread: bool,
    /// In the kernel's target set (record -- CMD and its children, -p).
    pub target: bool,
}

/// Where the sampled CPU was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleContext {
    User,
    /// Kernel mode in task context; `orig_ax` of the sample tells a syscall from an exception.
    Kernel,
    /// A kworker running an item queued by the served thread.
    Kworker,
    HardIrq,
    SoftIrq(u8),
    Idle,
}

/// One stack sample.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleEvent {
    pub cpu: u32,
    pub time_ns: u64,
    /// The task that was current (whose user stack `ustack` is).
    pub cur_pid: u32,
    pub cur_tid: u32,
    pub current_comm: String,
    /// Who the work served, when known at sample time.
    pub served: Option<Served>,
    /// Non-zero: the served thread comes later through [`LinkEvent`]s naming this key.
    pub hold: u64,
    pub context: SampleContext,
    /// Kernel mode in task context: the task's saved orig_ax (the syscall number when >= 0).
    pub orig_ax: i64,
    /// Instruction addresses, leaf first.
    pub kstack: Vec<u64>,
    pub ustack: Vec<u64>,
    /// The kernel could not read that stack (the sample keeps the other part).
    pub kstack_error: bool,
    pub ustack_error: bool,
    /// The user stack's frame-pointer walk stopped where the chain went wrong (a frame pointer
    /// that did not increase, or could not be read): the outer callers are missing.
    pub ustack_truncated: bool,
}

/// Where held samples go next.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkTarget {
    /// Attributed to this thread.
    Thread(Served),
    /// Passed on to another hold key.
    Hold(u64),
    /// Served nobody: KERNEL.
    Kernel,
    /// Nobody consumed it within the expiry time: KERNEL, counted as expired.
    Expired,
}

/// "Samples held on `from` go to `to`".
#[derive(Clone, Debug, PartialEq)]
pub struct LinkEvent {
    pub time_ns: u64,
    pub from: u64,
    pub to: LinkTarget,
}
