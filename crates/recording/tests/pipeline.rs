//! The recording pipeline without root: decoded samples and links fed through fakes of the kernel
//! side, the processes' maps and the symbolizer (common/mod.rs, which says how they name
//! addresses), checked against profiles worked out by hand: labels and buckets, the syscall
//! boundary, truncated and unwound user stacks, the accounting's processes, the kernel side's
//! failures. Python frames: pipeline_python.rs.

mod common;

use common::*;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use pkprof_accounting::{
    Buckets, Counters, CpuCounters, Interval as Accounting, Snapshot, SyscallCount, ThreadSample,
};
use pkprof_attribution::{LinkTarget, SampleContext, SampleEvent, Served, TargetSet};
use pkprof_profile::{FrameKind, FuncCount, Truncation, UserStacks};
use pkprof_recording::meta::{self, KernelLost};
use pkprof_recording::{
    Extras, RingRecord, Session, SessionError, StopReason, UnwoundStack, UserRegs,
};

// ---- Labels, buckets, weights and held samples -------------------------------------------------

#[test]
fn samples_are_labelled_weighted_and_bucketed() {
    let app = served(100, "app", true);
    let kworker = Served {
        kthread: true,
        ..served(50, "kworker/0:1", false)
    };
    let first = samples([
        // Three identical samples of the target: one group weighing 3.
        sample(100, "app", Some(app.clone())),
        sample(100, "app", Some(app.clone())),
        sample(100, "app", Some(app.clone())),
        // A process that is not a target: OTHER.
        sample(200, "other", Some(served(200, "other", false))),
        // An interrupt that served nobody: KERNEL, labelled [kernel].
        interrupt(200, SampleContext::HardIrq, 0, &[0x9000_0500]),
        // The idle task: IDLE, labelled [idle].
        interrupt(0, SampleContext::Idle, 0, &[0x9000_0600]),
        // A work item of a kernel thread: KERNEL, but labelled with the thread.
        SampleEvent {
            context: SampleContext::Kworker,
            served: Some(kworker),
            ustack: Vec::new(),
            kstack: vec![0x9000_0700],
            ..sample(50, "kworker/0:1", None)
        },
        // NET_RX work held until its reader is known.
        interrupt(200, SampleContext::SoftIrq(3), 7, &[K_NET_RX]),
        interrupt(200, SampleContext::SoftIrq(3), 9, &[K_NET_RX]),
        interrupt(200, SampleContext::SoftIrq(3), 10, &[K_NET_RX]),
        interrupt(200, SampleContext::SoftIrq(3), 11, &[K_NET_RX]),
    ]);
    let links = vec![
        // 7 passes to 8, which the target reads: its work, done on pid 200's CPU time.
        link(7, LinkTarget::Hold(8)),
        link(8, LinkTarget::Thread(app.clone())),
        // Nobody's (a link to KERNEL), expired in the kernel; 11 is never linked.
        link(9, LinkTarget::Kernel),
        link(10, LinkTarget::Expired),
        // A link for a key nothing is held on changes nothing.
        link(12, LinkTarget::Thread(app)),
    ];
    let mut kernel = FakeKernel::with(vec![first, links]);
    let mut maps = FakeMaps::default();
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[100], false);

    // 10 and 11: expired (one by the kernel's link, one still held at the end).
    assert_eq!(rec.held_expired, 2);
    assert_eq!(rec.undecodable, 0);
    assert_eq!(rec.stop, StopReason::CommandExited);
    assert!(!kernel.ring_open, "the ring is closed at the end");

    let p = assemble(&rec, &mut symbols());
    assert_eq!(
        groups(&p),
        [
            "Idle Idle pid=0 comm=[idle] cur=0 n=1 | k90000600",
            "Kernel HardIrq pid=0 comm=[kernel] cur=200 n=1 | k90000500",
            "Kernel Kworker pid=50 comm=kworker/0:1 cur=50 n=1 | k90000700",
            // 9, 10 and 11: the same stack and labels, one group.
            "Kernel SoftIrq(3) pid=0 comm=[kernel] cur=200 n=3 | net_rx_action",
            "Other User pid=200 comm=other cur=200 n=1 | u3000;u2000;u1000",
            "Process SoftIrq(3) pid=100 comm=app cur=200 n=1 | net_rx_action",
            "Process User pid=100 comm=app cur=100 n=3 | u3000;u2000;u1000",
        ]
    );
    // Every sample is in exactly one group.
    assert_eq!(p.samples.iter().map(|g| g.count).sum::<u64>(), 11);
    // Only samples with a user part count as user stacks: 3 + 1, all complete.
    assert_eq!(
        p.meta.user_stacks,
        UserStacks {
            complete: 4,
            truncated: Vec::new()
        }
    );
    assert_eq!(p.meta.lost.held_expired, 2);
}

#[test]
fn the_bucket_follows_the_target_set() {
    // The same OTHER sample of pid 200 is a target's work when everything is profiled.
    let s = samples([sample(200, "other", Some(served(200, "other", false)))]);
    let mut kernel = FakeKernel::with(vec![s]);
    let rec = record(
        &mut kernel,
        &mut FakeMaps::default(),
        TargetSet::System,
        &[],
        false,
    );
    let p = assemble(&rec, &mut symbols());
    assert_eq!(
        groups(&p),
        ["Process User pid=200 comm=other cur=200 n=1 | u3000;u2000;u1000"]
    );
}

// ---- The syscall boundary ----------------------------------------------------------------------

#[test]
fn kernel_samples_join_their_syscall_at_its_entry() {
    let app = served(100, "app", true);
    let kernel_sample = |orig_ax: i64, kstack: &[u64]| SampleEvent {
        context: SampleContext::Kernel,
        orig_ax,
        kstack: kstack.to_vec(),
        ..sample(100, "app", Some(app.clone()))
    };
    let s = samples([
        // write(2) from work(): the user stack, sys_write, the kernel's frames.
        kernel_sample(1, &KSTACK_SYSCALL),
        // The same kernel stack without a syscall number (an exception): no boundary frame.
        kernel_sample(-1, &KSTACK_SYSCALL),
        // orig_ax beyond any syscall number: not a syscall either (merges with the one above).
        kernel_sample(5000, &KSTACK_SYSCALL),
        // A syscall number, but the kernel part does not start at a syscall entry (a fault).
        kernel_sample(1, &[K_FAULT]),
    ]);
    let mut kernel = FakeKernel::with(vec![s]);
    let rec = record(
        &mut kernel,
        &mut FakeMaps::default(),
        TargetSet::Kernel,
        &[100],
        false,
    );
    let p = assemble(&rec, &mut symbols());
    assert_eq!(
        groups(&p),
        [
            "Process KernelTask pid=100 comm=app cur=100 n=1 | u3000;u2000;u1000;handle_mm_fault",
            "Process KernelTask pid=100 comm=app cur=100 n=2 | u3000;u2000;u1000;entry_SYSCALL_64;do_syscall_64;ksys_write",
            "Process Syscall pid=100 comm=app cur=100 n=1 | u3000;u2000;u1000;sys_write;entry_SYSCALL_64;do_syscall_64;ksys_write",
        ]
    );
    let sys = p.frames.iter().find(|f| f.name == "sys_write").unwrap();
    assert_eq!(
        (sys.kind, sys.module.as_str(), sys.offset),
        (FrameKind::Syscall, "[syscall]", 1)
    );
}

// ---- Truncated user stacks ---------------------------------------------------------------------

#[test]
fn truncated_stacks_get_a_root_mark_and_are_counted_by_reason() {
    let app = served(100, "app", true);
    let user = |pid: u32, ustack: &[u64], end: Option<Truncation>| SampleEvent {
        ustack: ustack.to_vec(),
        ustack_end: end,
        ..sample(pid, "app", Some(Served { pid, ..app.clone() }))
    };
    let s = samples([
        // The unwinder ran out of copied stack: its verdict stays.
        user(100, &USTACK, Some(Truncation::StackWindow)),
        // 0x9001 is outside every executable mapping of 100: cut there, `bad frame`.
        user(100, &[0x1000, 0x2001, 0x9001, 0x3001], None),
        // The leaf is kept wherever it is (the sampled ip is real).
        user(100, &[0x9000, 0x2001], None),
        // Process 300's maps were never captured: nothing can be judged, kept whole.
        user(300, &[0x1000, 0x9001], None),
    ]);
    let mut kernel = FakeKernel::with(vec![s]);
    let rec = record(
        &mut kernel,
        &mut FakeMaps::default(),
        TargetSet::Kernel,
        &[100],
        false,
    );
    let p = assemble(&rec, &mut symbols());
    assert_eq!(
        groups(&p),
        [
            "Process User pid=100 comm=app cur=100 n=1 | [truncated: bad frame];u2000;u1000",
            "Process User pid=100 comm=app cur=100 n=1 | [truncated: stack window];u3000;u2000;u1000",
            "Process User pid=100 comm=app cur=100 n=1 | u2000;u9000",
            "Process User pid=300 comm=app cur=300 n=1 | u9000;u1000",
        ]
    );
    assert_eq!(
        p.meta.user_stacks,
        UserStacks {
            complete: 2,
            truncated: vec![(Truncation::StackWindow, 1), (Truncation::BadFrame, 1)],
        }
    );
    let mark = p
        .frames
        .iter()
        .find(|f| f.name == "[truncated: bad frame]")
        .unwrap();
    assert_eq!(
        (mark.kind, mark.module.as_str()),
        (FrameKind::Truncated, "[truncated]")
    );
}

// ---- Maps capture and unwinding ----------------------------------------------------------------

#[test]
fn user_stacks_are_unwound_from_their_bytes_once_maps_are_captured() {
    let app = served(100, "app", true);
    let unwinding = |pid: u32| SampleEvent {
        // The frame-pointer walk as read; the unwinder replaces it.
        ustack: vec![0x1000, 0x7777],
        ustack_end: Some(Truncation::NoUnwindInfo),
        user_ip: 0x1000,
        user_sp: 0x7ffd_0000,
        user_bp: 0x7ffd_0040,
        ustack_bytes: vec![1, 2, 3, 4],
        ustack_bytes_short: true,
        ..sample(pid, "app", Some(Served { pid, ..app.clone() }))
    };
    let s = samples([unwinding(100), unwinding(100), unwinding(400)]);
    let mut kernel = FakeKernel::with(vec![s]);
    let mut maps = FakeMaps {
        uncapturable: HashSet::from([400]),
        unwound: HashMap::from([(
            100,
            UnwoundStack {
                frames: vec![0x1000, 0x2001, 0x5001],
                end: Some(Truncation::TablesMissing),
                // The walk stopped at a return address outside the captured maps.
                unmapped: Some(0x5001),
            },
        )]),
        ..FakeMaps::default()
    };
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[100], true);

    // Each process is captured and marked captured once, whether the capture worked or not.
    assert_eq!(maps.captures, [100, 400]);
    assert_eq!(kernel.marked, [100, 400]);
    // Per sample of 100: its ip (code for sure), then the unmapped return address's call.
    assert_eq!(
        maps.ensured,
        [
            (100, 0x1000, true),
            (100, 0x5000, true),
            (100, 0x1000, true),
            (100, 0x5000, true)
        ]
    );
    // 400's samples have no maps: counted, and its stack is the unwinder's (its ip alone).
    assert_eq!(rec.maps_missing, 1);
    assert_eq!(maps.unwinds.len(), 3);
    assert_eq!(
        maps.unwinds[0],
        UnwindCall {
            pid: 100,
            regs: UserRegs {
                ip: 0x1000,
                sp: 0x7ffd_0000,
                bp: 0x7ffd_0040
            },
            stack: vec![1, 2, 3, 4],
            window_full: false,
            fp_chain: vec![0x1000, 0x7777],
        }
    );
    assert_eq!(rec.costs.build.len(), 3);
    assert_eq!(rec.costs.unwind.len(), 3);
    assert_eq!(rec.costs.processes, 2);

    let mut sym = symbols();
    sym.code.insert(400, 0x1000..0x6000);
    let p = assemble(&rec, &mut sym);
    assert_eq!(
        groups(&p),
        [
            "Process User pid=100 comm=app cur=100 n=2 | [truncated: tables missing];u5000;u2000;u1000",
            "Process User pid=400 comm=app cur=400 n=1 | [truncated: tables missing];u1000",
        ]
    );
    assert_eq!(p.meta.lost.maps_missing, 1);
}

#[test]
fn without_unwinding_every_walked_address_is_checked_against_the_maps() {
    let s = samples([sample(100, "app", Some(served(100, "app", true)))]);
    let mut kernel = FakeKernel::with(vec![s]);
    let mut maps = FakeMaps::default();
    record(&mut kernel, &mut maps, TargetSet::Kernel, &[100], false);
    assert!(maps.unwinds.is_empty());
    assert_eq!(
        maps.ensured,
        [
            (100, 0x1000, false),
            (100, 0x2001, false),
            (100, 0x3001, false)
        ]
    );
}

// ---- Accounting, processes and the profile's description ---------------------------------------

fn thread(pid: u32, tid: u32, comm: &str, task_ns: u64) -> ThreadSample {
    ThreadSample {
        tid,
        pid,
        ppid: 1,
        comm: comm.into(),
        counters: Counters {
            task_ns,
            ..Counters::default()
        },
        ..ThreadSample::default()
    }
}

#[test]
fn processes_carry_their_exact_time_and_target_flag() {
    let mut served_thread = thread(100, 101, "app", 3_000);
    // 200 ns of receive work (the first chain's slot), 50 ns of work items (the third's).
    served_thread.counters.served_ns[0] = 200;
    served_thread.counters.served_ns[2] = 50;
    served_thread.counters.served_out_ns = 500;
    let mut forked = thread(300, 300, "child", 700);
    forked.target = true;
    let mut kthread = thread(2, 2, "kthreadd", 100);
    kthread.kthread = true;
    let mut kernel = FakeKernel {
        snapshot: Snapshot {
            mono_ns: 1_000_000_000,
            threads: vec![
                thread(100, 100, "app", 1_000),
                served_thread,
                thread(200, 200, "sibling", 400),
                forked,
                thread(400, 400, "bystander", 900),
                kthread,
            ],
            syscalls: vec![SyscallCount {
                pid: 100,
                nr: 1,
                name: "write".into(),
                count: 5,
                total_ns: 800,
                errors: 1,
            }],
            ..Snapshot::default()
        },
        // 200 is in the kernel's target set (a child of the command, followed at fork).
        targets: vec![200],
        ..FakeKernel::default()
    };
    let mut maps = FakeMaps {
        exes: HashMap::from([(100, "/bin/app".to_string())]),
        ..FakeMaps::default()
    };
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[100], false);

    let p = &rec.processes;
    assert_eq!(
        p.keys().copied().collect::<Vec<_>>(),
        [2, 100, 200, 300, 400]
    );
    // 100: own time 1000 + (3000 - 500 run for others), served 200 + 50 by others.
    assert_eq!(
        (p[&100].task_ns, p[&100].served_ns, p[&100].exe.as_str()),
        (3_500, 250, "/bin/app")
    );
    // Given (100), in the kernel's target set (200), forked into a target (300).
    let targets: Vec<u32> = p.values().filter(|p| p.target).map(|p| p.pid).collect();
    assert_eq!(targets, [100, 200, 300]);
    assert_eq!(p[&2].exe, "[kernel thread]");
    assert_eq!(p[&400].exe, "");
    assert_eq!(rec.syscalls.len(), 1);

    let profile = assemble(&rec, &mut symbols());
    assert_eq!(profile.processes.len(), 5);
    assert_eq!(
        (
            profile.syscalls[0].name.as_str(),
            profile.syscalls[0].count,
            profile.syscalls[0].errors
        ),
        ("write", 5, 1)
    );
}

#[test]
fn cpu_time_splits_the_user_share_between_targets_and_others() {
    let mut kernel = FakeKernel {
        snapshot: Snapshot {
            mono_ns: 1_000_000_000,
            threads: vec![
                thread(100, 100, "app", 1_000),
                thread(400, 400, "bystander", 1_800),
            ],
            ..Snapshot::default()
        },
        untracked_target_ns: 300,
        ..FakeKernel::default()
    };
    let mut rec = record(
        &mut kernel,
        &mut FakeMaps::default(),
        TargetSet::Kernel,
        &[100],
        false,
    );
    rec.processes.get_mut(&100).unwrap().served_ns = 200;
    let frame = Accounting {
        buckets: Buckets {
            wall_ns: 10_000,
            idle_ns: 2_000,
            processes_ns: 3_000,
            other_ns: 1_500,
            untracked_ns: 500,
            ..Buckets::default()
        },
        ..Accounting::default()
    };
    // Targets: 100's 1000 own + 200 served, and 300 of the 500 untracked ns the kernel knew to
    // be a target's. The rest of the 4500 user ns is OTHER; KERNEL is what is left of the wall.
    let t = meta::cpu_time(&frame, &rec);
    assert_eq!(
        (
            t.total_ns,
            t.idle_ns,
            t.processes_ns,
            t.other_ns,
            t.kernel_ns,
            t.untracked_ns
        ),
        (10_000, 2_000, 1_500, 3_000, 3_500, 500)
    );
    // Never more target time than the user share.
    rec.untracked_target_ns = 0;
    rec.processes.get_mut(&100).unwrap().task_ns = 9_000;
    let t = meta::cpu_time(&frame, &rec);
    assert_eq!((t.processes_ns, t.other_ns, t.kernel_ns), (4_500, 0, 3_500));
}

#[test]
fn the_profile_describes_its_losses_and_warnings() {
    let app = served(100, "app", true);
    let s = vec![
        RingRecord::Sample(SampleEvent {
            kstack_error: true,
            ..sample(100, "app", Some(app.clone()))
        }),
        RingRecord::Undecodable,
        RingRecord::Sample(SampleEvent {
            ustack_error: true,
            ustack: Vec::new(),
            ..sample(100, "app", Some(app))
        }),
        RingRecord::Undecodable,
    ];
    let mut kernel = FakeKernel::with(vec![s]);
    kernel.snapshot.cpus = (0..2)
        .map(|cpu| CpuCounters {
            cpu,
            ..CpuCounters::default()
        })
        .collect();
    kernel.snapshot.lost.thread_map_full = 4;
    let rec = record(
        &mut kernel,
        &mut FakeMaps::default(),
        TargetSet::Kernel,
        &[100],
        false,
    );
    assert_eq!(
        (rec.undecodable, rec.kstack_errors, rec.ustack_errors),
        (2, 1, 1)
    );
    let frame = rec.last_frame.clone().unwrap();
    let meta = meta::build(meta::Inputs {
        kernel_lost: KernelLost {
            ring_buffer_full: 6,
            target_table_full: 2,
        },
        pkprof_cpu_ns: 1234,
        ..meta_inputs(&rec, &frame)
    });
    assert_eq!((meta.cpus, meta.period_ns), (2, 10_101_010));
    assert_eq!(meta.pkprof_version, "0.1.0-test");
    let l = &meta.lost;
    assert_eq!(
        (
            l.ring_buffer_full,
            l.kernel_stack_errors,
            l.user_stack_errors,
            l.thread_table_full,
            l.target_table_full
        ),
        (6, 1, 1, 4, 2)
    );
    // BPF stats not enabled: neither their time nor their count is claimed.
    assert_eq!(
        (meta.overhead.bpf_run_ns, meta.overhead.bpf_run_count),
        (None, None)
    );

    let mut sym = symbols();
    sym.warnings = vec!["cannot read /bin/app".into()];
    let count = FuncCount {
        pid: 100,
        binary: "/bin/app".into(),
        function: "work".into(),
        count: 17,
    };
    let extras = Extras {
        func_counts: vec![count.clone()],
        bpf_stats_unmeasured: true,
        off_cpu: None,
    };
    let p = pkprof_recording::profile(meta, &rec, &mut sym, extras);
    assert_eq!(p.func_counts, [count]);
    assert_eq!(
        p.meta.warnings,
        [
            "cannot read /bin/app",
            "the kernel did not time pkprof's BPF programs (BPF stats need CAP_SYS_ADMIN): \
             their cost is not measured",
            "2 ring buffer records could not be decoded",
        ]
    );
    // The user stack of the second sample could not be read: no user part, not counted.
    assert_eq!(p.meta.user_stacks.complete, 1);
    assert_eq!(p.samples.iter().map(|g| g.count).sum::<u64>(), 2);
}

// ---- Failures of the kernel side ---------------------------------------------------------------

#[test]
fn a_failed_read_stops_the_recording_with_what_was_being_done() {
    let mut kernel = FakeKernel {
        fail_ring: true,
        ..FakeKernel::default()
    };
    let err = Session::new(
        &mut kernel,
        &mut FakeMaps::default(),
        TargetSet::System,
        &[],
        Duration::from_millis(100),
        false,
    )
    .run(|| Some(StopReason::Interrupted))
    .err()
    .unwrap();
    assert!(matches!(err, SessionError::OpenRing(_)));
    assert_eq!(err.to_string(), "reading samples");
    assert_eq!(
        std::error::Error::source(&err).unwrap().to_string(),
        "no ring buffer"
    );

    let mut kernel = FakeKernel {
        fail_snapshot: true,
        ..FakeKernel::default()
    };
    let err = Session::new(
        &mut kernel,
        &mut FakeMaps::default(),
        TargetSet::System,
        &[],
        Duration::from_millis(100),
        false,
    )
    .run(|| Some(StopReason::Interrupted))
    .err()
    .unwrap();
    assert_eq!(err.to_string(), "reading the accounting");
    assert_eq!(
        std::error::Error::source(&err).unwrap().to_string(),
        "map gone"
    );
}
