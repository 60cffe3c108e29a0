//! Protobuf body -> model, checking every index and enum value so that reports can index the
//! profile's tables freely afterwards.

use prost::Message;

use super::error::Corruption;
use super::proto;
use crate::model::*;

/// Decodes and checks the (uncompressed) body message.
pub(crate) fn decode_body(body: &[u8]) -> Result<Profile, Corruption> {
    let msg = proto::Profile::decode(body).map_err(|e| Corruption::Decode(one_line(&e)))?;
    let strings = Strings::new(msg.strings)?;
    let frames = msg
        .frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| frame(i as u32, f, &strings))
        .collect::<Result<Vec<_>, _>>()?;
    let stacks = msg
        .stacks
        .into_iter()
        .map(|s| {
            let len = frames.len();
            match s.frames.iter().find(|f| **f as usize >= len) {
                Some(f) => Err(out_of_range("frame id", *f, len)),
                None => Ok(Stack { frames: s.frames }),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let samples = msg
        .samples
        .into_iter()
        .map(|s| sample(s, stacks.len(), &strings))
        .collect::<Result<Vec<_>, _>>()?;
    let processes = msg
        .processes
        .into_iter()
        .map(|x| process(x, &strings))
        .collect::<Result<Vec<_>, _>>()?;
    let syscalls = msg
        .syscalls
        .into_iter()
        .map(|s| {
            Ok(SyscallStat {
                pid: s.pid,
                nr: s.nr,
                name: strings.get("syscall name string", s.name_str)?,
                count: s.count,
                total_ns: s.total_ns,
                errors: s.errors,
            })
        })
        .collect::<Result<Vec<_>, Corruption>>()?;
    let func_counts = msg
        .func_counts
        .into_iter()
        .map(|f| {
            Ok(FuncCount {
                pid: f.pid,
                binary: strings.get("function binary string", f.binary_str)?,
                function: strings.get("function name string", f.function_str)?,
                count: f.count,
            })
        })
        .collect::<Result<Vec<_>, Corruption>>()?;
    let cgroups = msg
        .cgroups
        .into_iter()
        .map(|c| {
            Ok(CgroupInfo {
                id: c.id,
                path: strings.get("cgroup path string", c.path_str)?,
            })
        })
        .collect::<Result<Vec<_>, Corruption>>()?;
    let off_cpu = msg
        .off_cpu
        .map(|o| off_cpu(o, stacks.len(), &strings))
        .transpose()?;
    Ok(Profile {
        off_cpu,
        meta: meta(msg.meta.unwrap_or_default())?,
        frames,
        stacks,
        samples,
        processes,
        syscalls,
        func_counts,
        cgroups,
    })
}

/// prost's messages are one line already; this keeps it so whatever a future version prints.
fn one_line(e: &dyn std::fmt::Display) -> String {
    e.to_string().replace(['\n', '\r'], " ")
}

fn out_of_range(what: &'static str, index: u32, len: usize) -> Corruption {
    Corruption::IndexOutOfRange {
        what,
        index: index.into(),
        len,
    }
}

fn unknown(what: &'static str, value: impl Into<i64>) -> Corruption {
    Corruption::UnknownEnum {
        what,
        value: value.into(),
    }
}

fn invalid(what: &'static str, value: impl Into<u64>) -> Corruption {
    Corruption::InvalidValue {
        what,
        value: value.into(),
    }
}

/// The string table read from the file.
struct Strings(Vec<String>);

impl Strings {
    fn new(table: Vec<String>) -> Result<Self, Corruption> {
        match table.first() {
            Some(first) if !first.is_empty() => Err(Corruption::StringTableStart),
            // An empty table still resolves index 0 to "".
            None => Ok(Strings(vec![String::new()])),
            Some(_) => Ok(Strings(table)),
        }
    }

    fn get(&self, what: &'static str, id: u32) -> Result<String, Corruption> {
        match self.0.get(id as usize) {
            Some(s) => Ok(s.clone()),
            None => Err(out_of_range(what, id, self.0.len())),
        }
    }
}

fn meta(m: proto::Meta) -> Result<Meta, Corruption> {
    let t = m.targets.unwrap_or_default();
    let l = m.lost.unwrap_or_default();
    let o = m.overhead.unwrap_or_default();
    let c = m.cpu_time.unwrap_or_default();
    let kind = match proto::TargetKind::try_from(t.kind) {
        Ok(proto::TargetKind::System) => TargetKind::System,
        Ok(proto::TargetKind::Command) => TargetKind::Command,
        Ok(proto::TargetKind::Pids) => TargetKind::Pids,
        Ok(proto::TargetKind::Cgroup) => TargetKind::Cgroup,
        Err(_) => return Err(unknown("target kind", t.kind)),
    };
    Ok(Meta {
        pkprof_version: m.pkprof_version,
        kernel: m.kernel,
        hostname: m.hostname,
        cpus: m.cpus,
        start_unix_ns: m.start_unix_ns,
        end_unix_ns: m.end_unix_ns,
        frequency_hz: m.frequency_hz,
        period_ns: m.period_ns,
        targets: Targets {
            kind,
            command: t.command,
            pids: t.pids,
            cgroup: t.cgroup,
        },
        lost: Lost {
            ring_buffer_full: l.ring_buffer_full,
            kernel_stack_errors: l.kernel_stack_errors,
            user_stack_errors: l.user_stack_errors,
            held_expired: l.held_expired,
            maps_missing: l.maps_missing,
            bpf_missed_events: l.bpf_missed_events,
            thread_table_full: l.thread_table_full,
            target_table_full: l.target_table_full,
        },
        overhead: Overhead {
            pkprof_cpu_ns: o.pkprof_cpu_ns,
            symbolize_ns: o.symbolize_ns,
            bpf_run_ns: o.bpf_run_ns,
            bpf_run_count: o.bpf_run_count,
        },
        cpu_time: CpuTime {
            total_ns: c.total_ns,
            idle_ns: c.idle_ns,
            processes_ns: c.processes_ns,
            other_ns: c.other_ns,
            kernel_ns: c.kernel_ns,
            untracked_ns: c.untracked_ns,
        },
        warnings: m.warnings,
        user_stacks: user_stacks(m.user_stacks.unwrap_or_default())?,
    })
}

/// Normalized as the model keeps it: each reason once, in order, zeros left out.
fn user_stacks(u: proto::UserStacks) -> Result<UserStacks, Corruption> {
    let mut out = UserStacks {
        complete: u.complete,
        truncated: Vec::new(),
    };
    for t in u.truncated {
        let reason = match proto::Truncation::try_from(t.reason) {
            Ok(proto::Truncation::NoUnwindInfo) => Truncation::NoUnwindInfo,
            Ok(proto::Truncation::TablesMissing) => Truncation::TablesMissing,
            Ok(proto::Truncation::StackWindow) => Truncation::StackWindow,
            Ok(proto::Truncation::ReadFault) => Truncation::ReadFault,
            Ok(proto::Truncation::DepthLimit) => Truncation::DepthLimit,
            Ok(proto::Truncation::TableLimit) => Truncation::TableLimit,
            Ok(proto::Truncation::BadFrame) => Truncation::BadFrame,
            Err(_) => return Err(unknown("truncation reason", t.reason)),
        };
        if t.samples > 0 {
            out.add(Some(reason), t.samples);
        }
    }
    Ok(out)
}

fn frame(id: FrameId, f: proto::Frame, strings: &Strings) -> Result<Frame, Corruption> {
    let kind = match proto::FrameKind::try_from(f.kind) {
        _ if f.truncated => FrameKind::Truncated,
        _ if f.python => FrameKind::Python,
        Ok(proto::FrameKind::User) => FrameKind::User,
        Ok(proto::FrameKind::Kernel) => FrameKind::Kernel,
        Ok(proto::FrameKind::Syscall) => FrameKind::Syscall,
        Err(_) => return Err(unknown("frame kind", f.kind)),
    };
    Ok(Frame {
        kind,
        name: strings.get("frame name string", f.name_str)?,
        module: strings.get("frame module string", f.module_str)?,
        offset: f.offset,
        symbolized: f.symbolized,
        file: f
            .file_str
            .map(|id| strings.get("frame file string", id))
            .transpose()?,
        line: f.line,
        inlined: f.inlined,
        build_id: {
            let hex = strings.get("frame build-id string", f.build_id_str)?;
            if !super::valid_build_id(&hex) {
                return Err(Corruption::BadBuildId { frame: id });
            }
            hex
        },
    })
}

fn bucket(b: i32) -> Result<Bucket, Corruption> {
    Ok(match proto::Bucket::try_from(b) {
        Ok(proto::Bucket::Process) => Bucket::Process,
        Ok(proto::Bucket::Other) => Bucket::Other,
        Ok(proto::Bucket::Kernel) => Bucket::Kernel,
        Ok(proto::Bucket::Idle) => Bucket::Idle,
        Err(_) => return Err(unknown("bucket", b)),
    })
}

fn context(c: i32, softirq_vec: u32) -> Result<Context, Corruption> {
    Ok(match proto::Context::try_from(c) {
        Ok(proto::Context::SoftIrq) => match u8::try_from(softirq_vec) {
            Ok(vec) => Context::SoftIrq(vec),
            Err(_) => return Err(invalid("softirq vector", softirq_vec)),
        },
        _ if softirq_vec != 0 => {
            return Err(invalid(
                "softirq vector outside softirq context",
                softirq_vec,
            ))
        }
        Ok(proto::Context::User) => Context::User,
        Ok(proto::Context::Syscall) => Context::Syscall,
        Ok(proto::Context::KernelTask) => Context::KernelTask,
        Ok(proto::Context::Kworker) => Context::Kworker,
        Ok(proto::Context::HardIrq) => Context::HardIrq,
        Ok(proto::Context::Idle) => Context::Idle,
        Err(_) => return Err(unknown("context", c)),
    })
}

fn block_reason(r: i32) -> Result<BlockReason, Corruption> {
    Ok(match proto::BlockReason::try_from(r) {
        Ok(proto::BlockReason::Runnable) => BlockReason::Runnable,
        Ok(proto::BlockReason::Io) => BlockReason::Io,
        Ok(proto::BlockReason::Net) => BlockReason::Net,
        Ok(proto::BlockReason::Ipc) => BlockReason::Ipc,
        Ok(proto::BlockReason::Lock) => BlockReason::Lock,
        Ok(proto::BlockReason::Sleep) => BlockReason::Sleep,
        Ok(proto::BlockReason::Poll) => BlockReason::Poll,
        Ok(proto::BlockReason::Other) => BlockReason::Other,
        Err(_) => return Err(unknown("block reason", r)),
    })
}

fn off_cpu(o: proto::OffCpu, stacks: usize, strings: &Strings) -> Result<OffCpu, Corruption> {
    if o.version != proto::OffCpuVersion::OffCpuVersion1 as i32 {
        return Err(unknown("off-CPU sample version", o.version));
    }
    let mut groups = Vec::with_capacity(o.groups.len());
    for g in o.groups {
        if g.stack as usize >= stacks {
            return Err(out_of_range("stack id", g.stack, stacks));
        }
        let waker_stack = g.waker_stack.checked_sub(1);
        if let Some(w) = waker_stack.filter(|w| *w as usize >= stacks) {
            return Err(out_of_range("waker stack id", w, stacks));
        }
        let mut chain = Vec::with_capacity(g.chain.len());
        let mut chain_blocked_ns = Vec::with_capacity(g.chain.len());
        for l in g.chain {
            let reason = block_reason(l.blocked_reason)?;
            chain.push(WakeLink {
                pid: l.pid,
                tid: l.tid,
                comm: strings.get("waker comm string", l.comm_str)?,
                context: context(l.context, l.softirq_vec)?,
                blocked: l.was_blocked.then_some(reason),
            });
            chain_blocked_ns.push(l.blocked_ns);
        }
        groups.push(OffCpuGroup {
            stack: g.stack,
            pid: g.pid,
            tid: g.tid,
            comm: strings.get("off-CPU comm string", g.comm_str)?,
            bucket: bucket(g.bucket)?,
            cgroup_id: g.cgroup_id,
            reason: block_reason(g.reason)?,
            waker_stack,
            chain,
            chain_blocked_ns,
            count: g.count,
            weight_ns: g.weight_ns,
        });
    }
    Ok(OffCpu {
        period_ns: o.period_ns,
        wake_chain: o.wake_chain,
        max_rate: o.max_rate,
        counts: OffCpuCounts {
            blocks: o.blocks,
            chosen: o.chosen,
            ring_full: o.ring_full,
            no_storage: o.no_storage,
            exited_pending: o.exited_pending,
            chain_truncated: o.chain_truncated,
            period_raised: o.period_raised,
            task_work_ns: o.task_work_ns,
            no_rseq: o.no_rseq,
        },
        groups,
    })
}

fn sample(
    s: proto::SampleGroup,
    stacks: usize,
    strings: &Strings,
) -> Result<SampleGroup, Corruption> {
    if s.stack as usize >= stacks {
        return Err(out_of_range("stack id", s.stack, stacks));
    }
    let bucket = bucket(s.bucket)?;
    let context = context(s.context, s.softirq_vec)?;
    Ok(SampleGroup {
        stack: s.stack,
        pid: s.pid,
        tid: s.tid,
        comm: strings.get("sample comm string", s.comm_str)?,
        current_pid: s.current_pid,
        bucket,
        context,
        cgroup_id: s.cgroup_id,
        count: s.count,
    })
}

fn process(x: proto::ProcessInfo, strings: &Strings) -> Result<ProcessInfo, Corruption> {
    Ok(ProcessInfo {
        pid: x.pid,
        ppid: x.ppid,
        comm: strings.get("process comm string", x.comm_str)?,
        exe: strings.get("process exe string", x.exe_str)?,
        target: x.target,
        exited: x.exited,
        task_ns: x.task_ns,
        user_ns: x.user_ns,
        sys_ns: x.sys_ns,
        hardirq_ns: x.hardirq_ns,
        softirq_ns: x.softirq_ns,
        served_ns: x.served_ns,
    })
}
