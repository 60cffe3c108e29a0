//! Model -> protobuf body: interns strings into the string table and checks the indices that
//! readers will check, so that a written file can always be read back.

use prost::Message;

use super::error::Corruption;
use super::proto;
use crate::model::*;

/// Encodes `p` as the (uncompressed) body message.
pub(crate) fn encode_body(p: &Profile) -> Result<Vec<u8>, Corruption> {
    check(p)?;
    let mut strings = Strings::default();
    strings.id(""); // entry 0 is always the empty string
    let frames = p.frames.iter().map(|f| frame(f, &mut strings)).collect();
    let stacks = p
        .stacks
        .iter()
        .map(|s| proto::Stack {
            frames: s.frames.clone(),
        })
        .collect();
    let samples = p.samples.iter().map(|s| sample(s, &mut strings)).collect();
    let processes = p
        .processes
        .iter()
        .map(|x| process(x, &mut strings))
        .collect();
    let syscalls = p
        .syscalls
        .iter()
        .map(|s| proto::SyscallStat {
            pid: s.pid,
            nr: s.nr,
            name_str: strings.id(&s.name),
            count: s.count,
            total_ns: s.total_ns,
            errors: s.errors,
        })
        .collect();
    let func_counts = p
        .func_counts
        .iter()
        .map(|f| proto::FuncCount {
            pid: f.pid,
            binary_str: strings.id(&f.binary),
            function_str: strings.id(&f.function),
            count: f.count,
        })
        .collect();
    let cgroups = p
        .cgroups
        .iter()
        .map(|c| proto::CgroupInfo {
            id: c.id,
            path_str: strings.id(&c.path),
        })
        .collect();
    let off_cpu = p.off_cpu.as_ref().map(|o| off_cpu(o, &mut strings));
    let msg = proto::Profile {
        strings: strings.table.into_iter().map(str::to_owned).collect(),
        meta: Some(meta(&p.meta)),
        frames,
        stacks,
        samples,
        processes,
        syscalls,
        func_counts,
        cgroups,
        off_cpu,
    };
    Ok(msg.encode_to_vec())
}

/// The same index and build-id checks as the reader's, on the model.
fn check(p: &Profile) -> Result<(), Corruption> {
    if let Some(i) = p
        .frames
        .iter()
        .position(|f| !super::valid_build_id(&f.build_id))
    {
        return Err(Corruption::BadBuildId { frame: i as u32 });
    }
    let out_of_range = |what, index: u32, len| Corruption::IndexOutOfRange {
        what,
        index: index.into(),
        len,
    };
    for s in &p.stacks {
        if let Some(f) = s.frames.iter().find(|f| **f as usize >= p.frames.len()) {
            return Err(out_of_range("frame id", *f, p.frames.len()));
        }
    }
    if let Some(s) = p
        .samples
        .iter()
        .find(|s| s.stack as usize >= p.stacks.len())
    {
        return Err(out_of_range("stack id", s.stack, p.stacks.len()));
    }
    for g in p.off_cpu.iter().flat_map(|o| &o.groups) {
        for id in std::iter::once(g.stack).chain(g.waker_stack) {
            if id as usize >= p.stacks.len() {
                return Err(out_of_range("stack id", id, p.stacks.len()));
            }
        }
    }
    Ok(())
}

/// The string table under construction.
#[derive(Default)]
struct Strings<'a> {
    ids: crate::InternMap<&'a str, u32>,
    table: Vec<&'a str>,
}

impl<'a> Strings<'a> {
    fn id(&mut self, s: &'a str) -> u32 {
        if let Some(id) = self.ids.get(s) {
            return *id;
        }
        let id = self.table.len() as u32;
        self.table.push(s);
        self.ids.insert(s, id);
        id
    }
}

fn meta(m: &Meta) -> proto::Meta {
    let t = &m.targets;
    let (l, o, c) = (&m.lost, &m.overhead, &m.cpu_time);
    proto::Meta {
        pkprof_version: m.pkprof_version.clone(),
        kernel: m.kernel.clone(),
        hostname: m.hostname.clone(),
        cpus: m.cpus,
        start_unix_ns: m.start_unix_ns,
        end_unix_ns: m.end_unix_ns,
        frequency_hz: m.frequency_hz,
        period_ns: m.period_ns,
        targets: Some(proto::Targets {
            kind: target_kind(t.kind) as i32,
            command: t.command.clone(),
            pids: t.pids.clone(),
            cgroup: t.cgroup.clone(),
        }),
        lost: Some(proto::Lost {
            ring_buffer_full: l.ring_buffer_full,
            kernel_stack_errors: l.kernel_stack_errors,
            user_stack_errors: l.user_stack_errors,
            held_expired: l.held_expired,
            maps_missing: l.maps_missing,
            bpf_missed_events: l.bpf_missed_events,
            thread_table_full: l.thread_table_full,
            target_table_full: l.target_table_full,
        }),
        overhead: Some(proto::Overhead {
            pkprof_cpu_ns: o.pkprof_cpu_ns,
            symbolize_ns: o.symbolize_ns,
            bpf_run_ns: o.bpf_run_ns,
            bpf_run_count: o.bpf_run_count,
        }),
        cpu_time: Some(proto::CpuTime {
            total_ns: c.total_ns,
            idle_ns: c.idle_ns,
            processes_ns: c.processes_ns,
            other_ns: c.other_ns,
            kernel_ns: c.kernel_ns,
            untracked_ns: c.untracked_ns,
        }),
        warnings: m.warnings.clone(),
        user_stacks: Some(proto::UserStacks {
            complete: m.user_stacks.complete,
            truncated: m
                .user_stacks
                .truncated
                .iter()
                .map(|&(reason, samples)| proto::TruncatedStacks {
                    reason: truncation(reason) as i32,
                    samples,
                })
                .collect(),
        }),
    }
}

fn truncation(t: Truncation) -> proto::Truncation {
    match t {
        Truncation::NoUnwindInfo => proto::Truncation::NoUnwindInfo,
        Truncation::TablesMissing => proto::Truncation::TablesMissing,
        Truncation::StackWindow => proto::Truncation::StackWindow,
        Truncation::ReadFault => proto::Truncation::ReadFault,
        Truncation::DepthLimit => proto::Truncation::DepthLimit,
        Truncation::TableLimit => proto::Truncation::TableLimit,
        Truncation::BadFrame => proto::Truncation::BadFrame,
    }
}

fn target_kind(k: TargetKind) -> proto::TargetKind {
    match k {
        TargetKind::System => proto::TargetKind::System,
        TargetKind::Command => proto::TargetKind::Command,
        TargetKind::Pids => proto::TargetKind::Pids,
        TargetKind::Cgroup => proto::TargetKind::Cgroup,
    }
}

fn frame<'a>(f: &'a Frame, strings: &mut Strings<'a>) -> proto::Frame {
    let kind = match f.kind {
        // Older readers know no truncated or Python kind: they see a user frame (fields
        // `truncated`, `python`).
        FrameKind::User | FrameKind::Truncated | FrameKind::Python => proto::FrameKind::User,
        FrameKind::Kernel => proto::FrameKind::Kernel,
        FrameKind::Syscall => proto::FrameKind::Syscall,
    };
    proto::Frame {
        kind: kind as i32,
        name_str: strings.id(&f.name),
        module_str: strings.id(&f.module),
        offset: f.offset,
        symbolized: f.symbolized,
        file_str: f.file.as_deref().map(|s| strings.id(s)),
        line: f.line,
        inlined: f.inlined,
        truncated: f.kind == FrameKind::Truncated,
        build_id_str: strings.id(&f.build_id),
        python: f.kind == FrameKind::Python,
    }
}

fn bucket(b: Bucket) -> proto::Bucket {
    match b {
        Bucket::Process => proto::Bucket::Process,
        Bucket::Other => proto::Bucket::Other,
        Bucket::Kernel => proto::Bucket::Kernel,
        Bucket::Idle => proto::Bucket::Idle,
    }
}

fn block_reason(r: BlockReason) -> proto::BlockReason {
    match r {
        BlockReason::Runnable => proto::BlockReason::Runnable,
        BlockReason::Io => proto::BlockReason::Io,
        BlockReason::Net => proto::BlockReason::Net,
        BlockReason::Ipc => proto::BlockReason::Ipc,
        BlockReason::Lock => proto::BlockReason::Lock,
        BlockReason::Sleep => proto::BlockReason::Sleep,
        BlockReason::Poll => proto::BlockReason::Poll,
        BlockReason::Other => proto::BlockReason::Other,
    }
}

fn off_cpu<'a>(o: &'a OffCpu, strings: &mut Strings<'a>) -> proto::OffCpu {
    let groups = o
        .groups
        .iter()
        .map(|g| proto::OffCpuGroup {
            stack: g.stack,
            pid: g.pid,
            tid: g.tid,
            comm_str: strings.id(&g.comm),
            bucket: bucket(g.bucket) as i32,
            cgroup_id: g.cgroup_id,
            reason: block_reason(g.reason) as i32,
            waker_stack: g.waker_stack.map_or(0, |s| s + 1),
            chain: g
                .chain
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let (context, softirq_vec) = context(l.context);
                    proto::WakeLink {
                        pid: l.pid,
                        tid: l.tid,
                        comm_str: strings.id(&l.comm),
                        context: context as i32,
                        softirq_vec,
                        was_blocked: l.blocked.is_some(),
                        blocked_reason: block_reason(l.blocked.unwrap_or_default()) as i32,
                        blocked_ns: g.chain_blocked_ns.get(i).copied().unwrap_or(0),
                    }
                })
                .collect(),
            count: g.count,
            weight_ns: g.weight_ns,
        })
        .collect();
    let c = &o.counts;
    proto::OffCpu {
        version: proto::OffCpuVersion::OffCpuVersion1 as i32,
        period_ns: o.period_ns,
        wake_chain: o.wake_chain,
        blocks: c.blocks,
        chosen: c.chosen,
        ring_full: c.ring_full,
        no_storage: c.no_storage,
        exited_pending: c.exited_pending,
        chain_truncated: c.chain_truncated,
        groups,
        max_rate: o.max_rate,
        period_raised: c.period_raised,
        task_work_ns: c.task_work_ns,
        no_rseq: c.no_rseq,
    }
}

fn context(c: Context) -> (proto::Context, u32) {
    match c {
        Context::User => (proto::Context::User, 0),
        Context::Syscall => (proto::Context::Syscall, 0),
        Context::KernelTask => (proto::Context::KernelTask, 0),
        Context::Kworker => (proto::Context::Kworker, 0),
        Context::HardIrq => (proto::Context::HardIrq, 0),
        Context::SoftIrq(vec) => (proto::Context::SoftIrq, vec.into()),
        Context::Idle => (proto::Context::Idle, 0),
    }
}

fn sample<'a>(s: &'a SampleGroup, strings: &mut Strings<'a>) -> proto::SampleGroup {
    let bucket = bucket(s.bucket);
    let (context, softirq_vec) = context(s.context);
    proto::SampleGroup {
        stack: s.stack,
        pid: s.pid,
        tid: s.tid,
        comm_str: strings.id(&s.comm),
        current_pid: s.current_pid,
        bucket: bucket as i32,
        context: context as i32,
        softirq_vec,
        cgroup_id: s.cgroup_id,
        count: s.count,
    }
}

fn process<'a>(x: &'a ProcessInfo, strings: &mut Strings<'a>) -> proto::ProcessInfo {
    proto::ProcessInfo {
        pid: x.pid,
        ppid: x.ppid,
        comm_str: strings.id(&x.comm),
        exe_str: strings.id(&x.exe),
        target: x.target,
        exited: x.exited,
        task_ns: x.task_ns,
        user_ns: x.user_ns,
        sys_ns: x.sys_ns,
        hardirq_ns: x.hardirq_ns,
        softirq_ns: x.softirq_ns,
        served_ns: x.served_ns,
    }
}
