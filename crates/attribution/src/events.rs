//! The events collection delivers, in plain Rust types (collection converts the kernel records).

use pkprof_profile::Truncation;

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
    /// Instruction addresses, leaf first. `ustack` is the frame-pointer walk as read, then the
    /// unwound stack once unwound (docs/design.md, "User stacks").
    pub kstack: Vec<u64>,
    pub ustack: Vec<u64>,
    /// The kernel could not read that stack (the sample keeps the other part).
    pub kstack_error: bool,
    pub ustack_error: bool,
    /// Why the user stack stops before the thread's entry (None: it does not, as far as known).
    /// As read: the frame-pointer walk stopped where the chain went wrong; once unwound: the
    /// unwinder's verdict.
    pub ustack_end: Option<Truncation>,
    /// What the user stack is unwound from: the user registers (instruction, stack and frame
    /// pointer) and the stack's bytes from the stack pointer up (emptied once unwound).
    pub user_ip: u64,
    pub user_sp: u64,
    pub user_bp: u64,
    pub ustack_bytes: Vec<u8>,
    /// The copy of the stack's bytes stopped at an unreadable page before its window was full.
    pub ustack_bytes_short: bool,
    /// ns the kernel side took to build the sample (stack walks and copy; not the ring output).
    pub build_ns: u32,
    /// The CPython frames of the sampled thread, leaf first (docs/design.md, "Python frames"),
    /// and how their walk went.
    pub python: Vec<PyRawFrame>,
    pub python_walk: PyWalk,
}

/// A CPython frame as the sampling program read it: its code object and instruction pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PyRawFrame {
    pub code: u64,
    pub instr: u64,
    /// The first frame of an evaluation loop's run (one `_PyEval_EvalFrameDefault` native frame).
    pub entry: bool,
}

/// How the Python frame walk of a sample went (pkprof.h, `pkprof_py_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PyWalk {
    /// Not a known CPython process (or no user stack was taken).
    #[default]
    None,
    /// The whole chain.
    Complete,
    /// The thread had no Python thread state.
    NoThread,
    /// A frame or thread state could not be read: the frames read so far are kept.
    ReadFault,
    /// Deeper than the kernel side keeps: the innermost frames are kept.
    DepthLimit,
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

/// Who woke a blocked thread (an entry of a wake chain), as the kernel saw it at the wakeup.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WakerEvent {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// Task context (Kernel: the waker was in a syscall or a kernel thread), or the interrupt.
    pub context: SampleContext,
    pub kthread: bool,
    /// The waker had itself been woken just before: how long it had been blocked, and why.
    pub blocked: Option<(u64, pkprof_profile::BlockReason)>,
}

/// One off-CPU sample (`record --off-cpu`): the blocked thread's stacks and labels in `sample`
/// (its user stack taken when its blocking call returned), the off period and its weight, and
/// the wake chain: `chain[0]` woke it, `chain[i + 1]` woke `chain[i]`.
#[derive(Clone, Debug, PartialEq)]
pub struct OffCpuEvent {
    pub sample: SampleEvent,
    pub off_ns: u64,
    /// Switch-out to switch-in, and to the wakeup (0: no wakeup seen).
    pub offcpu_ns: u64,
    pub blocked_ns: u64,
    /// The off time this sample stands for (sampling scaled).
    pub weight_ns: u64,
    pub reason: pkprof_profile::BlockReason,
    pub chain: Vec<WakerEvent>,
    /// The waker's stacks (leaf first; the user one a frame-pointer walk), empty if not taken.
    pub waker_kstack: Vec<u64>,
    pub waker_ustack: Vec<u64>,
}
