//! The profile's types: metadata, frames, stacks, labelled sample groups and exact counts.
//!
//! Frames are shared by every process that runs the same code; the `PIDu:` / `PIDk:` labels of
//! docs/design.md ("Frame names") are applied by reports from the sample's served `pid`, not stored in the frame.

/// Index into [`Profile::frames`].
pub type FrameId = u32;
/// Index into [`Profile::stacks`].
pub type StackId = u32;

/// A whole recording.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    pub meta: Meta,
    pub frames: Vec<Frame>,
    pub stacks: Vec<Stack>,
    /// Samples aggregated by (stack, labels); each group counts samples of one `period_ns`.
    pub samples: Vec<SampleGroup>,
    /// Every process seen, with its exact CPU time over the recording (from the accounting).
    pub processes: Vec<ProcessInfo>,
    /// Exact per-process syscall counts and times (`record --syscalls`).
    pub syscalls: Vec<SyscallStat>,
    /// Exact call counts of user functions (`record --count FUNC@BINARY`).
    pub func_counts: Vec<FuncCount>,
    /// Paths of the cgroups samples name by id ([`SampleGroup::cgroup_id`]), where known.
    pub cgroups: Vec<CgroupInfo>,
    /// Off-CPU samples (`record --off-cpu`): the second sample kind, with weights.
    pub off_cpu: Option<OffCpu>,
}

/// Self-description of a recording.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    /// Version of pkprof that wrote the profile.
    pub pkprof_version: String,
    /// `uname -r` of the recorded machine.
    pub kernel: String,
    pub hostname: String,
    /// Online CPUs sampled.
    pub cpus: u32,
    /// Wall clock (Unix epoch, ns) at start and end of sampling.
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// Sampling frequency per CPU and the resulting period each sample stands for.
    pub frequency_hz: u64,
    pub period_ns: u64,
    pub targets: Targets,
    pub lost: Lost,
    pub overhead: Overhead,
    /// Exact CPU time over the recording, by bucket (from the accounting, not from samples).
    pub cpu_time: CpuTime,
    /// Problems that did not stop the recording (unreadable binary, PID gone before capture...).
    pub warnings: Vec<String>,
    /// How far the sampled user stacks were unwound (docs/design.md, "User stacks").
    pub user_stacks: UserStacks,
}

/// Samples with a user stack, by how their unwinding ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserStacks {
    /// Reached the thread's entry (`_start`, `clone3` / `start_thread`).
    pub complete: u64,
    /// Stopped early, by reason (each reason once, in [`Truncation`] order, zeros left out).
    pub truncated: Vec<(Truncation, u64)>,
}

impl UserStacks {
    /// Samples whose user stack stopped early, whatever the reason.
    pub fn truncated_total(&self) -> u64 {
        self.truncated.iter().map(|(_, n)| n).sum()
    }

    /// Counts one more stack ending `end` (None: complete).
    pub fn add(&mut self, end: Option<Truncation>, samples: u64) {
        match end {
            None => self.complete += samples,
            Some(t) => match self.truncated.iter_mut().find(|(r, _)| *r == t) {
                Some((_, n)) => *n += samples,
                None => {
                    self.truncated.push((t, samples));
                    self.truncated.sort();
                }
            },
        }
    }
}

/// Why a user stack stops before the thread's entry. A truncated stack's root is a
/// [`FrameKind::Truncated`] frame named after its reason (`[truncated: stack window]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Truncation {
    /// A frame's code has no unwind table (`.eh_frame`, `.debug_frame`) and its frame pointer
    /// did not lead on.
    NoUnwindInfo,
    /// The process's maps or a binary's tables were not available (it exited before they were
    /// read, the binary could not be opened).
    TablesMissing,
    /// The unwinding needed stack bytes beyond the copied window (`record --stack-bytes`).
    StackWindow,
    /// The stack could not be read (stack pointer into unmapped memory).
    ReadFault,
    /// More frames than pkprof keeps.
    DepthLimit,
    /// The unwind tables' memory limit was reached (`record --unwind-memory`).
    TableLimit,
    /// The walk met a frame that cannot be right: malformed unwind info, a frame chain going
    /// backwards, a return address outside every executable mapping.
    BadFrame,
}

impl Truncation {
    /// Every reason, in order.
    pub const ALL: [Truncation; 7] = [
        Truncation::NoUnwindInfo,
        Truncation::TablesMissing,
        Truncation::StackWindow,
        Truncation::ReadFault,
        Truncation::DepthLimit,
        Truncation::TableLimit,
        Truncation::BadFrame,
    ];

    /// The reason as reports print it.
    pub fn label(self) -> &'static str {
        match self {
            Truncation::NoUnwindInfo => "no unwind info",
            Truncation::TablesMissing => "tables missing",
            Truncation::StackWindow => "stack window",
            Truncation::ReadFault => "stack unreadable",
            Truncation::DepthLimit => "depth limit",
            Truncation::TableLimit => "unwind memory limit",
            Truncation::BadFrame => "bad frame",
        }
    }

    /// How a frame-pointer walk alone (`--stack-bytes 0`) ends: `bad frame` where the chain went
    /// wrong, else `no unwind info`: a walk cannot tell a whole chain from one that stopped at
    /// code built without frame pointers, so it is never called complete.
    pub fn frame_pointer_walk(went_wrong: bool) -> Truncation {
        if went_wrong {
            Truncation::BadFrame
        } else {
            Truncation::NoUnwindInfo
        }
    }

    /// The name of the root frame of a stack truncated for this reason.
    pub fn frame_name(self) -> String {
        format!("[truncated: {}]", self.label())
    }
}

/// What was profiled. Work served to a target is labelled [`Bucket::Process`]; to anybody else
/// [`Bucket::Other`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Targets {
    pub kind: TargetKind,
    /// `Command`: argv of the command run; other kinds: empty.
    pub command: Vec<String>,
    /// `Pids`: the PIDs given; `Command`: the command's PID (children followed).
    pub pids: Vec<u32>,
    /// `Cgroup`: the cgroup path given.
    pub cgroup: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TargetKind {
    #[default]
    System,
    Command,
    Pids,
    Cgroup,
}

/// Events and samples that could not be recorded or labelled; all counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lost {
    /// Samples dropped because the ring buffer was full.
    pub ring_buffer_full: u64,
    /// Samples whose kernel / user stack could not be read (recorded without that part).
    pub kernel_stack_errors: u64,
    pub user_stack_errors: u64,
    /// Samples held for a served-event tag that nobody consumed in time (labelled KERNEL).
    pub held_expired: u64,
    /// Samples of processes whose memory maps could not be captured (user frames unsymbolized).
    pub maps_missing: u64,
    /// Missed kernel events that affect labels (BPF program recursion misses).
    pub bpf_missed_events: u64,
    /// Threads that did not fit in the kernel's thread table (`record --max-threads`): their
    /// exact time is in [`CpuTime::untracked_ns`], OTHER.
    pub thread_table_full: u64,
    /// Children of a target that did not fit in the kernel's target set (`record --max-targets`):
    /// their own children were not followed.
    pub target_table_full: u64,
}

impl Lost {
    /// Every count with its name as reports print it (`ring buffer full`), zeros included, in a
    /// fixed order. Destructures the struct so that a new field cannot be left out of reports.
    pub fn parts(&self) -> [(&'static str, u64); 8] {
        let Lost {
            ring_buffer_full,
            kernel_stack_errors,
            user_stack_errors,
            held_expired,
            maps_missing,
            bpf_missed_events,
            thread_table_full,
            target_table_full,
        } = *self;
        [
            ("ring buffer full", ring_buffer_full),
            ("kernel stacks unreadable", kernel_stack_errors),
            ("user stacks unreadable", user_stack_errors),
            ("held samples expired", held_expired),
            ("samples without maps", maps_missing),
            ("BPF events missed", bpf_missed_events),
            ("thread table full", thread_table_full),
            ("target table full", target_table_full),
        ]
    }
}

/// What the recording itself cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overhead {
    /// pkprof's own CPU time (user + system) while recording, and while symbolizing.
    pub pkprof_cpu_ns: u64,
    pub symbolize_ns: u64,
    /// Run time and run count of pkprof's BPF programs (kernel stats); `None` when not measured
    /// (the kernel's BPF stats need CAP_SYS_ADMIN, or `--no-bpf-stats` was given).
    pub bpf_run_ns: Option<u64>,
    pub bpf_run_count: Option<u64>,
}

/// Exact CPU time of the recording (every CPU, the whole duration), split into buckets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuTime {
    /// Duration x CPUs.
    pub total_ns: u64,
    pub idle_ns: u64,
    /// Served the targets (own time and attributed kernel work).
    pub processes_ns: u64,
    pub other_ns: u64,
    pub kernel_ns: u64,
    /// Part of `other_ns` (or, for targets, of `processes_ns`): own time of threads that found
    /// the kernel's thread table full (see [`Lost::thread_table_full`]).
    pub untracked_ns: u64,
}

/// One symbolized frame (a function, or an address nobody could name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Frame {
    pub kind: FrameKind,
    /// Demangled function name, or `module+0xOFFSET` when unknown, or `module!<after SYMBOL>` /
    /// `module!<unknown>` for code of a file that no symbol covers (never empty).
    pub name: String,
    /// Binary or shared object path for user frames, `[kernel]` or the module name for kernel
    /// frames, `[syscall]` for syscall-boundary frames.
    pub module: String,
    /// File offset in `module` (user) or address (kernel) of the sampled instruction.
    pub offset: u64,
    /// False when no symbol names the address (`module+0xOFFSET`, `module!<after SYMBOL>`).
    pub symbolized: bool,
    /// Source position (`record --lines`).
    pub file: Option<String>,
    pub line: Option<u32>,
    /// This frame is a function inlined into its caller (the frame before it in the stack).
    pub inlined: bool,
    /// User frames: the GNU build-id of `module` in lower-case hex (empty when it has none), so
    /// that `report --symbols DIR` can name the frame from separate debug files later.
    pub build_id: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FrameKind {
    #[default]
    User,
    Kernel,
    /// The syscall boundary: joins the user frame that made a syscall to the kernel frames that ran
    /// it; named `sys_<name>` (e.g. `sys_read`).
    Syscall,
    /// Not code: the root mark (`[truncated]`) of a stack whose outer callers are missing, because
    /// the frame-pointer walk met a broken chain.
    Truncated,
    /// A CPython function, named `FILE:FUNC` (`fib.py:fib`; `module` is the source path), spliced
    /// in place of the interpreter loop's native frame that ran it (docs/design.md, "Python
    /// frames").
    Python,
}

/// A call stack, root (outermost caller) first: user frames, then the syscall boundary, then kernel
/// frames down to the sampled one. A `[truncated]` frame ([`FrameKind::Truncated`]) first says the
/// outer callers are missing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stack {
    pub frames: Vec<FrameId>,
}

/// Samples with the same stack and labels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampleGroup {
    pub stack: StackId,
    /// Served process and thread (0 for the KERNEL and IDLE buckets).
    pub pid: u32,
    pub tid: u32,
    /// Command name of the served thread.
    pub comm: String,
    /// The process that was current on the CPU (differs from `pid` for interrupt work done for
    /// someone else).
    pub current_pid: u32,
    pub bucket: Bucket,
    pub context: Context,
    /// cgroup v2 id of the served thread (0 if unknown).
    pub cgroup_id: u64,
    pub count: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bucket {
    /// Served a profiled process.
    #[default]
    Process,
    /// Served a process that is not profiled.
    Other,
    /// System work with no beneficiary (timers, RCU, scheduler, expired tags).
    Kernel,
    /// The CPU was idle.
    Idle,
}

/// Where the CPU was when sampled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Context {
    /// User mode.
    #[default]
    User,
    /// Kernel mode inside a syscall of the current task.
    Syscall,
    /// Kernel mode in task context outside a syscall (page fault, kernel thread).
    KernelTask,
    /// A kworker running a work item queued by the served thread.
    Kworker,
    HardIrq,
    /// Softirq, with its vector (3 = NET_RX, 4 = BLOCK...).
    SoftIrq(u8),
    Idle,
}

/// A process seen during the recording, with its exact CPU time over it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    /// Executable path (`/proc/PID/exe` when captured).
    pub exe: String,
    pub target: bool,
    pub exited: bool,
    /// Own time, split by mode when known.
    pub task_ns: u64,
    pub user_ns: u64,
    pub sys_ns: u64,
    /// Interrupt work Linux billed to it while it was current.
    pub hardirq_ns: u64,
    pub softirq_ns: u64,
    /// Kernel work done for it by others (NET, BLOCK, WORKQ).
    pub served_ns: u64,
}

/// A cgroup v2 directory: its id (inode number) and path below the cgroup2 mount. Container and
/// unit labels are parsed from the path ([`crate::cgroup::CgroupLabels`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CgroupInfo {
    pub id: u64,
    pub path: String,
}

/// Exact count and time of one syscall in one process.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyscallStat {
    pub pid: u32,
    pub nr: u32,
    /// Syscall name without prefix (`read`).
    pub name: String,
    pub count: u64,
    /// Wall time from entry to exit, blocked time included.
    pub total_ns: u64,
    pub errors: u64,
}

/// Exact call count of one user function in one process (uprobe).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FuncCount {
    pub pid: u32,
    pub binary: String,
    pub function: String,
    pub count: u64,
}

impl Profile {
    /// Total samples in the profile.
    pub fn total_samples(&self) -> u64 {
        self.samples.iter().map(|s| s.count).sum()
    }

    /// The path of cgroup `id`, when the profile knows it.
    pub fn cgroup_path(&self, id: u64) -> Option<&str> {
        self.cgroups
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.path.as_str())
    }

    /// The frames of a stack, root first.
    pub fn stack_frames(&self, id: StackId) -> impl Iterator<Item = &Frame> {
        self.stacks[id as usize]
            .frames
            .iter()
            .map(|f| &self.frames[*f as usize])
    }
}

/// The kinds of samples a profile holds: on-CPU (cpu-clock, each one period) and off-CPU
/// (blocked time, each with its own weight).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SampleKind {
    #[default]
    OnCpu,
    OffCpu,
}

impl SampleKind {
    pub fn label(self) -> &'static str {
        match self {
            SampleKind::OnCpu => "on-cpu",
            SampleKind::OffCpu => "off-cpu",
        }
    }
}

/// Why a thread was off its CPU (pkprof.h's `enum pkprof_block_reason`, same order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockReason {
    /// Runnable: waiting for a CPU.
    Runnable,
    /// Uninterruptible I/O wait.
    Io,
    /// A network socket.
    Net,
    /// A pipe, FIFO or unix socket.
    Ipc,
    /// A futex.
    Lock,
    Sleep,
    /// poll, select, epoll.
    Poll,
    #[default]
    Other,
}

impl BlockReason {
    pub const ALL: [BlockReason; 8] = [
        BlockReason::Runnable,
        BlockReason::Io,
        BlockReason::Net,
        BlockReason::Ipc,
        BlockReason::Lock,
        BlockReason::Sleep,
        BlockReason::Poll,
        BlockReason::Other,
    ];

    /// The reason as reports print it (and as a frame name: `[off-cpu: sleep]`).
    pub fn label(self) -> &'static str {
        match self {
            BlockReason::Runnable => "runnable",
            BlockReason::Io => "io",
            BlockReason::Net => "net",
            BlockReason::Ipc => "ipc",
            BlockReason::Lock => "lock",
            BlockReason::Sleep => "sleep",
            BlockReason::Poll => "poll",
            BlockReason::Other => "other",
        }
    }

    /// From the kernel's value (anything unknown is Other).
    pub fn from_index(i: u32) -> BlockReason {
        BlockReason::ALL
            .get(i as usize)
            .copied()
            .unwrap_or(BlockReason::Other)
    }
}

/// Off-CPU samples of a recording (`record --off-cpu`; docs/design.md, "Off-CPU samples").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OffCpu {
    /// Sampling period of off time: a block of d ns was taken with probability
    /// min(1, d / period) and weighs max(d, period); 0: every block was taken.
    pub period_ns: u64,
    /// Wake-chain entries kept.
    pub wake_chain: u32,
    /// Chosen samples a second per CPU above which that CPU's period doubles (0: never).
    pub max_rate: u32,
    pub counts: OffCpuCounts,
    pub groups: Vec<OffCpuGroup>,
}

/// What the kernel side followed and lost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OffCpuCounts {
    /// Blocks of sampled threads, and those chosen as samples.
    pub blocks: u64,
    pub chosen: u64,
    /// Chosen samples lost: the ring buffer was full.
    pub ring_full: u64,
    /// Blocks not followed (no task storage).
    pub no_storage: u64,
    /// Samples without a user stack: the thread exited before its blocking call returned.
    pub exited_pending: u64,
    /// Wake chains cut at the depth limit.
    pub chain_truncated: u64,
    /// Doublings of a CPU's sampling period at the rate cap.
    pub period_raised: u64,
    /// Run time of the task works that took user stacks (not in the BPF programs' stats).
    pub task_work_ns: u64,
    /// Samples without a user stack: taken at rseq's return to user mode, and the thread had
    /// no rseq area.
    pub no_rseq: u64,
}

/// One entry of a wake chain: who woke the thread (entry 0) or woke the entry before.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct WakeLink {
    /// The waking task (for interrupt work: the interrupted one, which says nothing).
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// Task context (Syscall / KernelTask), or the interrupt it woke from.
    pub context: Context,
    /// The waker had itself been woken just before from a block of this reason (the next entry
    /// woke it); None: it was not (the chain ends here).
    pub blocked: Option<BlockReason>,
}

/// Off-CPU samples with the same blocked stack, labels, reason, waker and chain.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OffCpuGroup {
    /// The blocked thread's stack (user, then kernel down to where it blocked).
    pub stack: StackId,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub bucket: Bucket,
    pub cgroup_id: u64,
    pub reason: BlockReason,
    /// The waker's stack (kernel, and user frames of a waker in task context), if taken.
    pub waker_stack: Option<StackId>,
    /// Who woke it, then who woke the waker, ... (empty: no wakeup was seen).
    pub chain: Vec<WakeLink>,
    /// Per chain entry: how long that waker had been blocked before it was woken, summed.
    pub chain_blocked_ns: Vec<u64>,
    /// Samples, and the off-CPU time they stand for (switch-out to switch-in).
    pub count: u64,
    pub weight_ns: u64,
}
