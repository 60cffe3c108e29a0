//! Structured: a profile built from the fuzzer's bytes (any strings, integers, enum values and
//! valid indices) must write and read back equal.
#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use pkprof_profile::*;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = profile(&mut Unstructured::new(data)) else { return };
    let mut out = Vec::new();
    write_profile(&p, &mut out).expect("write");
    assert_eq!(read_profile(&out[..]).expect("read back"), p);
});

fn profile(u: &mut Unstructured) -> Result<Profile> {
    let meta = Meta {
        pkprof_version: u.arbitrary()?,
        kernel: u.arbitrary()?,
        hostname: u.arbitrary()?,
        cpus: u.arbitrary()?,
        start_unix_ns: u.arbitrary()?,
        end_unix_ns: u.arbitrary()?,
        frequency_hz: u.arbitrary()?,
        period_ns: u.arbitrary()?,
        targets: Targets {
            kind: *u.choose(&[
                TargetKind::System,
                TargetKind::Command,
                TargetKind::Pids,
                TargetKind::Cgroup,
            ])?,
            command: u.arbitrary()?,
            pids: u.arbitrary()?,
            cgroup: u.arbitrary()?,
        },
        lost: Lost {
            ring_buffer_full: u.arbitrary()?,
            kernel_stack_errors: u.arbitrary()?,
            user_stack_errors: u.arbitrary()?,
            held_expired: u.arbitrary()?,
            maps_missing: u.arbitrary()?,
            bpf_missed_events: u.arbitrary()?,
            thread_table_full: u.arbitrary()?,
            target_table_full: u.arbitrary()?,
        },
        overhead: Overhead {
            pkprof_cpu_ns: u.arbitrary()?,
            symbolize_ns: u.arbitrary()?,
            bpf_run_ns: u.arbitrary()?,
            bpf_run_count: u.arbitrary()?,
        },
        cpu_time: CpuTime {
            total_ns: u.arbitrary()?,
            idle_ns: u.arbitrary()?,
            processes_ns: u.arbitrary()?,
            other_ns: u.arbitrary()?,
            kernel_ns: u.arbitrary()?,
            untracked_ns: u.arbitrary()?,
        },
        warnings: u.arbitrary()?,
        user_stacks: {
            let mut us = UserStacks { complete: u.arbitrary()?, truncated: Vec::new() };
            for _ in 0..u.int_in_range(0..=8)? {
                // As the model keeps it (the reader normalizes): no zeros.
                let n: u64 = u.arbitrary()?;
                us.add(Some(*u.choose(&Truncation::ALL)?), n.max(1) / 2 + 1);
            }
            us
        },
    };
    let mut p = Profile { meta, ..Profile::default() };
    for _ in 0..u.int_in_range(0..=20)? {
        p.frames.push(Frame {
            kind: *u.choose(&[
                FrameKind::User,
                FrameKind::Kernel,
                FrameKind::Syscall,
                FrameKind::Truncated,
                FrameKind::Python,
            ])?,
            name: u.arbitrary()?,
            module: u.arbitrary()?,
            offset: u.arbitrary()?,
            symbolized: u.arbitrary()?,
            file: u.arbitrary()?,
            line: u.arbitrary()?,
            inlined: u.arbitrary()?,
            // Lower-case hex of whole bytes, or empty (the reader refuses anything else).
            build_id: {
                let bytes: Vec<u8> = u.arbitrary()?;
                bytes.iter().map(|b| format!("{b:02x}")).collect()
            },
        });
    }
    if !p.frames.is_empty() {
        for _ in 0..u.int_in_range(0..=20)? {
            let n = u.int_in_range(0..=8)?;
            let last = p.frames.len() as u32 - 1;
            let frames = (0..n).map(|_| u.int_in_range(0..=last)).collect::<Result<_>>()?;
            p.stacks.push(Stack { frames });
        }
    }
    if !p.stacks.is_empty() {
        let last = p.stacks.len() as u32 - 1;
        for _ in 0..u.int_in_range(0..=30)? {
            let context = match u.int_in_range(0..=6)? {
                0 => Context::User,
                1 => Context::Syscall,
                2 => Context::KernelTask,
                3 => Context::Kworker,
                4 => Context::HardIrq,
                5 => Context::SoftIrq(u.arbitrary()?),
                _ => Context::Idle,
            };
            p.samples.push(SampleGroup {
                stack: u.int_in_range(0..=last)?,
                pid: u.arbitrary()?,
                tid: u.arbitrary()?,
                comm: u.arbitrary()?,
                current_pid: u.arbitrary()?,
                bucket: *u.choose(&[Bucket::Process, Bucket::Other, Bucket::Kernel, Bucket::Idle])?,
                context,
                cgroup_id: u.arbitrary()?,
                count: u.arbitrary()?,
            });
        }
    }
    for _ in 0..u.int_in_range(0..=5)? {
        p.processes.push(ProcessInfo {
            pid: u.arbitrary()?,
            ppid: u.arbitrary()?,
            comm: u.arbitrary()?,
            exe: u.arbitrary()?,
            target: u.arbitrary()?,
            exited: u.arbitrary()?,
            task_ns: u.arbitrary()?,
            user_ns: u.arbitrary()?,
            sys_ns: u.arbitrary()?,
            hardirq_ns: u.arbitrary()?,
            softirq_ns: u.arbitrary()?,
            served_ns: u.arbitrary()?,
        });
    }
    for _ in 0..u.int_in_range(0..=5)? {
        p.syscalls.push(SyscallStat {
            pid: u.arbitrary()?,
            nr: u.arbitrary()?,
            name: u.arbitrary()?,
            count: u.arbitrary()?,
            total_ns: u.arbitrary()?,
            errors: u.arbitrary()?,
        });
    }
    for _ in 0..u.int_in_range(0..=5)? {
        p.func_counts.push(FuncCount {
            pid: u.arbitrary()?,
            binary: u.arbitrary()?,
            function: u.arbitrary()?,
            count: u.arbitrary()?,
        });
    }
    Ok(p)
}
