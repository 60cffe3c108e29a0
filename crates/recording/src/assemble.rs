//! From labelled raw samples to a self-contained profile: symbolizes every distinct address once
//! (user addresses per process, kernel addresses together), joins user and kernel stacks at the
//! syscall boundary, and fills in the exact counts.
//!
//! User stacks come unwound (session.rs, docs/design.md "User stacks") or, with `--stack-bytes 0`,
//! from a frame-pointer walk that already stopped at a broken chain (BPF side, sample.bpf.h);
//! here they are also cut at the first return address outside every executable mapping of the
//! process (data read as an address). A stack that stops before the thread's entry gets a
//! `[truncated: REASON]` root frame, and every user stack is counted in the profile's
//! `user_stacks` by how it ended. A return address repeated with increasing frame pointers is
//! recursion, not a broken walk, and stays.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use pkprof_attribution::{SampleContext, Truncation};
use pkprof_profile::{
    Context, Frame, FrameId, FrameKind, FuncCount, Meta, OffCpu, OffCpuGroup, Profile,
    ProfileBuilder, SampleGroup, SyscallStat, UserStacks, WakeLink,
};

use crate::aggregate::{Aggregate, RawStack};
use crate::python::{splice, PythonStats, EVAL_LOOP};
use crate::session::Recorded;
use crate::sources::Symbols;

/// Where a raw address was sampled: return addresses (every frame but the leaf) point after the
/// call, so they are looked up one byte earlier to land in the calling instruction.
fn lookup_addr(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

/// Kernel functions that show a sample is inside a syscall (the entry path).
fn is_syscall_entry(name: &str) -> bool {
    name.starts_with("entry_SYSCALL")
        || name == "do_syscall_64"
        || name.starts_with("do_fast_syscall")
}

/// Symbolized frames (outermost first) of every distinct address.
struct Symbolized {
    kernel: HashMap<u64, Vec<FrameId>>,
    user: HashMap<(u32, u64), Vec<FrameId>>,
}

/// The user addresses of `s` worth symbolizing, leaf first, and why the stack stops early: the
/// walk's own verdict, or a return address outside every executable mapping (where the rest is
/// cut). The leaf is kept wherever it is (the sampled instruction pointer is real); a process
/// whose maps were not captured is kept whole.
fn user_part<'a>(s: &'a RawStack, sym: &impl Symbols) -> (&'a [u64], Option<Truncation>) {
    let cut = s
        .ustack
        .iter()
        .enumerate()
        .skip(1)
        .find(|(i, a)| sym.is_executable(s.user_pid, lookup_addr(*i, **a)) == Some(false))
        .map(|(i, _)| i);
    match cut {
        Some(i) => (&s.ustack[..i], Some(Truncation::BadFrame)),
        // No user part (interrupt work, kernel threads): nothing to be truncated.
        None if s.ustack.is_empty() => (&s.ustack, None),
        None => (&s.ustack, s.end),
    }
}

/// The root frame of a stack whose outer callers are missing, named after the reason.
fn truncated_frame(reason: Truncation) -> Frame {
    Frame {
        kind: FrameKind::Truncated,
        name: reason.frame_name(),
        module: "[truncated]".into(),
        symbolized: true,
        ..Frame::default()
    }
}

fn symbolize(agg: &Aggregate, sym: &mut impl Symbols, b: &mut ProfileBuilder) -> Symbolized {
    let mut kaddrs: HashSet<u64> = HashSet::new();
    let mut uaddrs: HashMap<u32, HashSet<u64>> = HashMap::new();
    for s in agg.stacks() {
        kaddrs.extend(s.kstack.iter().enumerate().map(|(i, a)| lookup_addr(i, *a)));
        uaddrs.entry(s.user_pid).or_default().extend(
            user_part(s, sym)
                .0
                .iter()
                .enumerate()
                .map(|(i, a)| lookup_addr(i, *a)),
        );
    }
    let intern = |frames: Vec<Frame>, b: &mut ProfileBuilder| -> Vec<FrameId> {
        frames.into_iter().map(|f| b.frame(f)).collect()
    };
    let kaddrs: Vec<u64> = kaddrs.into_iter().collect();
    let kernel = kaddrs
        .iter()
        .copied()
        .zip(sym.symbolize_kernel(&kaddrs))
        .map(|(a, f)| (a, intern(f, b)))
        .collect();
    let mut user = HashMap::new();
    for (pid, addrs) in uaddrs {
        let addrs: Vec<u64> = addrs.into_iter().collect();
        for (a, f) in addrs.iter().copied().zip(sym.symbolize_user(pid, &addrs)) {
            user.insert((pid, a), intern(f, b));
        }
    }
    Symbolized { kernel, user }
}

/// The user and kernel frames of a raw stack, root first; whether its kernel part starts at a
/// syscall entry; how its user part ended (None for a stack without user part).
struct StackParts {
    user: Vec<FrameId>,
    kernel: Vec<FrameId>,
    in_syscall: bool,
    user_end: Option<Option<Truncation>>,
    /// Its Python frames' runs matched the interpreter-loop frames one for one (or it has none).
    python_matched: bool,
}

fn stack_frames(
    s: &RawStack,
    sym: &impl Symbols,
    syms: &Symbolized,
    python: &[FrameId],
    b: &mut ProfileBuilder,
) -> StackParts {
    let mut user = Vec::new();
    let (ustack, end) = user_part(s, sym);
    if let Some(reason) = end {
        user.push(b.frame(truncated_frame(reason)));
    }
    let mut native = Vec::new();
    for (i, a) in ustack.iter().enumerate().rev() {
        if let Some(f) = syms.user.get(&(s.user_pid, lookup_addr(i, *a))) {
            native.extend_from_slice(f);
        }
    }
    // docs/design.md, "Python frames": each run of Python frames in place of its loop frame.
    let py: Vec<(FrameId, bool)> = s
        .python
        .iter()
        .map(|r| (python[r.id as usize], r.entry))
        .collect();
    let python_matched = splice(
        &native,
        |id| b.frame_at(id).name == EVAL_LOOP,
        &py,
        &mut user,
    );
    let mut kernel = Vec::new();
    for (i, a) in s.kstack.iter().enumerate().rev() {
        if let Some(f) = syms.kernel.get(&lookup_addr(i, *a)) {
            kernel.extend_from_slice(f);
        }
    }
    let in_syscall = kernel
        .iter()
        .take(4)
        .any(|id| is_syscall_entry(&b.frame_at(*id).name));
    StackParts {
        user,
        kernel,
        in_syscall,
        user_end: (!ustack.is_empty()).then_some(end),
        python_matched,
    }
}

/// Adds every sample group of `agg` to the builder; with `off_cpu` (its settings and counts),
/// the off-CPU groups too. Returns the samples whose Python frames did not match their native
/// stack's interpreter-loop frames one for one, on- and off-CPU.
pub fn add_samples(
    agg: &Aggregate,
    sym: &mut impl Symbols,
    b: &mut ProfileBuilder,
    off_cpu: Option<OffCpu>,
) -> u64 {
    let syms = symbolize(agg, sym, b);
    let python: Vec<FrameId> = agg
        .python_frames()
        .iter()
        .map(|f| b.frame(f.clone()))
        .collect();
    let parts: Vec<_> = agg
        .stacks()
        .iter()
        .map(|s| stack_frames(s, sym, &syms, &python, b))
        .collect();
    let mut unmatched = 0;
    let mut stack_ids: HashMap<(u32, Option<u32>), u32> = HashMap::new();
    let mut user_stacks = UserStacks::default();
    for (raw, labels, count) in agg.groups() {
        let StackParts {
            user,
            kernel,
            in_syscall,
            user_end,
            python_matched,
        } = &parts[raw as usize];
        if let Some(end) = user_end {
            user_stacks.add(*end, count);
        }
        if !python_matched {
            unmatched += count;
        }
        let syscall = labels.syscall.filter(|_| *in_syscall);
        let context = context(labels.context, syscall.is_some());
        let stack = *stack_ids.entry((raw, syscall)).or_insert_with(|| {
            let mut frames = user.clone();
            if let Some(nr) = syscall {
                frames.push(b.frame(syscall_frame(nr, &sym.syscall_name(nr))));
            }
            frames.extend_from_slice(kernel);
            b.stack(frames)
        });
        let served = labels.served.as_ref();
        b.sample(SampleGroup {
            stack,
            pid: served.map_or(0, |s| s.pid),
            tid: served.map_or(0, |s| s.tid),
            comm: served.map_or_else(
                || match labels.context {
                    SampleContext::Idle => "[idle]".to_string(),
                    _ => "[kernel]".to_string(),
                },
                |s| s.comm.clone(),
            ),
            current_pid: labels.current_pid,
            bucket: labels.bucket,
            context,
            cgroup_id: served.map_or(0, |s| s.cgroup_id),
            count,
        });
    }
    b.meta_mut().user_stacks = user_stacks;
    if let Some(off) = off_cpu {
        let groups = agg
            .off_groups()
            .map(|(raw, l, sums)| {
                let StackParts {
                    user,
                    kernel,
                    in_syscall,
                    python_matched,
                    ..
                } = &parts[raw as usize];
                if !python_matched {
                    unmatched += sums.count;
                }
                let syscall = l.labels.syscall.filter(|_| *in_syscall);
                let stack = *stack_ids.entry((raw, syscall)).or_insert_with(|| {
                    let mut frames = user.clone();
                    if let Some(nr) = syscall {
                        frames.push(b.frame(syscall_frame(nr, &sym.syscall_name(nr))));
                    }
                    frames.extend_from_slice(kernel);
                    b.stack(frames)
                });
                let waker_stack = l.waker_stack.map(|w| {
                    *stack_ids.entry((w, None)).or_insert_with(|| {
                        let p = &parts[w as usize];
                        let mut frames = p.user.clone();
                        frames.extend_from_slice(&p.kernel);
                        b.stack(frames)
                    })
                });
                let served = l.labels.served.as_ref();
                OffCpuGroup {
                    stack,
                    pid: served.map_or(0, |s| s.pid),
                    tid: served.map_or(0, |s| s.tid),
                    comm: served.map_or_else(|| l.labels.current_comm.clone(), |s| s.comm.clone()),
                    bucket: l.labels.bucket,
                    cgroup_id: served.map_or(0, |s| s.cgroup_id),
                    reason: l.reason,
                    waker_stack,
                    chain: l
                        .chain
                        .iter()
                        .map(|w| WakeLink {
                            pid: w.pid,
                            tid: w.tid,
                            comm: w.comm.clone(),
                            // A task waker is in a system call, unless it is a kernel thread.
                            context: context(w.context, !w.kthread),
                            blocked: w.blocked,
                        })
                        .collect(),
                    chain_blocked_ns: sums.chain_blocked_ns.clone(),
                    count: sums.count,
                    weight_ns: sums.weight_ns,
                }
            })
            .collect();
        b.off_cpu(OffCpu { groups, ..off });
    }
    unmatched
}

/// The profile's context of a sample taken in `c` (`syscall`: kernel mode inside a call).
fn context(c: SampleContext, syscall: bool) -> Context {
    match c {
        SampleContext::User => Context::User,
        SampleContext::Kernel if syscall => Context::Syscall,
        SampleContext::Kernel => Context::KernelTask,
        SampleContext::Kworker => Context::Kworker,
        SampleContext::HardIrq => Context::HardIrq,
        SampleContext::SoftIrq(v) => Context::SoftIrq(v),
        SampleContext::Idle => Context::Idle,
    }
}

/// The profile's lines about Python: interpreters found or not supported, and how the frame
/// walks ended when any was cut short (docs/design.md, "Python frames").
fn python_warnings(stats: &PythonStats, unmatched: u64) -> Vec<String> {
    use pkprof_attribution::PyWalk;
    let mut out = Vec::new();
    for f in &stats.found {
        out.push(format!("python: {f}: Python frames spliced in"));
    }
    for u in &stats.unsupported {
        out.push(format!(
            "python: {u}: no structure offsets for this version (pkprof knows {}); its samples are native-only",
            pkprof_symbolize::python::supported_versions().join(", ")
        ));
    }
    let n = |w: PyWalk| stats.walks.get(&w).copied().unwrap_or(0);
    let cut = [
        ("read fault", n(PyWalk::ReadFault)),
        ("depth limit", n(PyWalk::DepthLimit)),
        ("no thread state", n(PyWalk::NoThread)),
        ("unreadable code object", stats.unnamed),
        ("not matching the native stack", unmatched),
    ];
    if cut.iter().any(|(_, c)| *c > 0) {
        let parts: Vec<String> = cut
            .iter()
            .filter(|(_, c)| *c > 0)
            .map(|(r, c)| format!("{c} {r}"))
            .collect();
        out.push(format!(
            "python: {} samples walked whole; truncated or partial: {}",
            n(PyWalk::Complete),
            parts.join(", ")
        ));
    }
    out
}

/// The syscall boundary frame `sys_<name>` joining a user call site to the kernel's work.
fn syscall_frame(nr: u32, name: &str) -> Frame {
    Frame {
        kind: FrameKind::Syscall,
        name: format!("sys_{name}"),
        module: "[syscall]".into(),
        offset: nr as u64,
        symbolized: true,
        ..Frame::default()
    }
}

/// What the profile holds besides the recording's samples and processes.
pub struct Extras {
    /// Exact call counts of the `--count` probes.
    pub func_counts: Vec<FuncCount>,
    /// BPF stats were asked for but the kernel did not time pkprof's programs.
    pub bpf_stats_unmeasured: bool,
    /// `record --off-cpu`: its settings and the kernel side's counts (groups filled here).
    pub off_cpu: Option<OffCpu>,
}

/// The profile of a recording: `meta` (see `meta::build`), the samples symbolized through `sym`
/// (timed into `meta.overhead.symbolize_ns`), the processes with their exact CPU time, the exact
/// syscall and call counts, and the warnings (the symbolizer's, unmeasured BPF stats,
/// undecodable ring records).
pub fn profile(meta: Meta, recorded: &Recorded, sym: &mut impl Symbols, extras: Extras) -> Profile {
    let mut builder = ProfileBuilder::new(meta);
    let sym_start = Instant::now();
    let unmatched = add_samples(&recorded.aggregate, sym, &mut builder, extras.off_cpu);
    let symbolize_ns = sym_start.elapsed().as_nanos() as u64;
    for p in recorded.processes.values() {
        builder.process(p.clone());
    }
    for s in &recorded.syscalls {
        builder.syscall(SyscallStat {
            pid: s.pid,
            nr: s.nr,
            name: s.name.clone(),
            count: s.count,
            total_ns: s.total_ns,
            errors: s.errors,
        });
    }
    for c in extras.func_counts {
        builder.func_count(c);
    }
    let m = builder.meta_mut();
    m.overhead.symbolize_ns = symbolize_ns;
    m.warnings = sym.warnings();
    m.warnings
        .extend(python_warnings(&recorded.python, unmatched));
    if extras.bpf_stats_unmeasured {
        m.warnings.push(
            "the kernel did not time pkprof's BPF programs (BPF stats need CAP_SYS_ADMIN): \
             their cost is not measured"
                .to_string(),
        );
    }
    if recorded.undecodable > 0 {
        m.warnings.push(format!(
            "{} ring buffer records could not be decoded",
            recorded.undecodable
        ));
    }
    builder.finish()
}
