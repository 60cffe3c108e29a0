//! The recording pipeline without root: decoded samples and links fed through fakes of the kernel
//! side, the processes' maps and the symbolizer, checked against profiles worked out by hand.
//!
//! The fake symbolizer names a user address `u<hex>` and a kernel address by a small table (else
//! `k<hex>`). Return addresses (every frame but the leaf) are looked up one byte earlier, so the
//! stacks below use callers ending in 1: `[0x1000, 0x2001, 0x3001]` reads `u3000;u2000;u1000`
//! root first.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;
use std::time::Duration;

use pkprof_accounting::{
    Buckets, Counters, CpuCounters, Interval as Accounting, Snapshot, SyscallCount, ThreadSample,
};
use pkprof_attribution::{LinkEvent, LinkTarget, SampleContext, SampleEvent, Served, TargetSet};
use pkprof_attribution::{PyRawFrame, PyWalk};
use pkprof_profile::{
    Frame, FrameKind, FuncCount, Profile, TargetKind, Targets, Truncation, UserStacks,
};
use pkprof_recording::meta::{self, KernelLost};
use pkprof_recording::python::{CodeInfo, PyDetect, PyLayout, PyOffsets, EVAL_LOOP};
use pkprof_recording::{
    Extras, KernelSource, ProcessMaps, Recorded, RingRecord, Session, SessionError, StopReason,
    Symbols, UnwoundStack, UserRegs,
};

// ---- Fakes -------------------------------------------------------------------------------------

#[derive(Debug)]
struct FakeError(&'static str);

impl std::fmt::Display for FakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for FakeError {}

/// The kernel side: each poll hands over the next batch, the final drain what is left.
#[derive(Default)]
struct FakeKernel {
    batches: VecDeque<Vec<RingRecord>>,
    snapshot: Snapshot,
    targets: Vec<u32>,
    untracked_target_ns: u64,
    marked: Vec<u32>,
    ring_open: bool,
    fail_ring: bool,
    fail_snapshot: bool,
}

impl FakeKernel {
    fn with(batches: Vec<Vec<RingRecord>>) -> Self {
        FakeKernel {
            batches: batches.into(),
            ..FakeKernel::default()
        }
    }
}

impl KernelSource for FakeKernel {
    type Error = FakeError;

    fn attach_mono_ns(&self) -> u64 {
        0
    }
    fn now_ns(&self) -> u64 {
        1_000_000
    }
    fn max_threads(&self) -> u32 {
        1024
    }
    fn open_ring(&mut self) -> Result<(), FakeError> {
        if self.fail_ring {
            return Err(FakeError("no ring buffer"));
        }
        self.ring_open = true;
        Ok(())
    }
    fn poll(&mut self, _: Duration, out: &mut Vec<RingRecord>) -> Result<(), FakeError> {
        assert!(self.ring_open);
        out.extend(self.batches.pop_front().unwrap_or_default());
        Ok(())
    }
    fn drain(&mut self, out: &mut Vec<RingRecord>) -> Result<(), FakeError> {
        assert!(self.ring_open);
        out.extend(self.batches.drain(..).flatten());
        Ok(())
    }
    fn close_ring(&mut self) {
        self.ring_open = false;
    }
    fn snapshot(&mut self) -> Result<Snapshot, FakeError> {
        if self.fail_snapshot {
            return Err(FakeError("map gone"));
        }
        Ok(self.snapshot.clone())
    }
    fn untracked_target_ns(&mut self) -> Result<u64, FakeError> {
        Ok(self.untracked_target_ns)
    }
    fn targets(&mut self) -> Vec<u32> {
        self.targets.clone()
    }
    fn mark_captured(&mut self, pid: u32) -> Result<(), FakeError> {
        self.marked.push(pid);
        Ok(())
    }
}

/// One call of `ProcessMaps::unwind`.
#[derive(Debug, PartialEq)]
struct UnwindCall {
    pid: u32,
    regs: UserRegs,
    stack: Vec<u8>,
    window_full: bool,
    fp_chain: Vec<u64>,
}

#[derive(Default)]
struct FakeMaps {
    /// Processes whose maps cannot be captured.
    uncapturable: HashSet<u32>,
    captures: Vec<u32>,
    /// (pid, address, known to be code)
    ensured: Vec<(u32, u64, bool)>,
    unwound: HashMap<u32, UnwoundStack>,
    unwinds: Vec<UnwindCall>,
    exes: HashMap<u32, String>,
    /// What `detect_python` finds per process (absent: not Python), and the code objects.
    python: HashMap<u32, PyDetect>,
    codes: HashMap<u64, CodeInfo>,
    /// The processes `detect_python` was asked about, in order.
    detections: Vec<u32>,
    /// Each process's maps generation (absent: not captured); an `ensure_*mapped` of a process
    /// in `mapped_later` bumps it and makes `detect_python` find that (ld.so mapping
    /// libpython after the exec's first sample).
    generations: HashMap<u32, u64>,
    mapped_later: HashMap<u32, PyDetect>,
}

impl FakeMaps {
    /// The re-capture of an `ensure_*mapped` finds `mapped_later`'s code, once.
    fn map_later(&mut self, pid: u32) {
        if let Some(d) = self.mapped_later.remove(&pid) {
            self.python.insert(pid, d);
            *self.generations.entry(pid).or_default() += 1;
        }
    }
}

impl ProcessMaps for FakeMaps {
    type Error = String;

    fn capture_process(&mut self, pid: u32) -> Result<(), String> {
        self.captures.push(pid);
        if self.uncapturable.contains(&pid) {
            return Err(format!("process {pid} exited"));
        }
        *self.generations.entry(pid).or_default() += 1;
        Ok(())
    }
    fn ensure_mapped(&mut self, pid: u32, addr: u64) {
        self.ensured.push((pid, addr, false));
        self.map_later(pid);
    }
    fn ensure_code_mapped(&mut self, pid: u32, addr: u64) {
        self.ensured.push((pid, addr, true));
        self.map_later(pid);
    }
    fn maps_generation(&self, pid: u32) -> Option<u64> {
        self.generations.get(&pid).copied()
    }
    fn unwind(
        &mut self,
        pid: u32,
        regs: UserRegs,
        stack: &[u8],
        window_full: bool,
        fp_chain: &[u64],
    ) -> UnwoundStack {
        self.unwinds.push(UnwindCall {
            pid,
            regs,
            stack: stack.to_vec(),
            window_full,
            fp_chain: fp_chain.to_vec(),
        });
        // As the real unwinder: a process without maps gives its ip alone, `tables missing`.
        self.unwound
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| UnwoundStack {
                frames: vec![regs.ip],
                end: Some(Truncation::TablesMissing),
                unmapped: None,
            })
    }
    fn exe(&mut self, pid: u32, _live: bool) -> Option<String> {
        self.exes.get(&pid).cloned()
    }
    fn detect_python(&mut self, pid: u32) -> PyDetect {
        self.detections.push(pid);
        self.python
            .get(&pid)
            .cloned()
            .unwrap_or(PyDetect::NotPython)
    }
    fn python_code(&mut self, _pid: u32, _o: &PyOffsets, addr: u64) -> Option<CodeInfo> {
        self.codes.get(&addr).cloned()
    }
}

#[derive(Default)]
struct FakeSymbols {
    /// The executable range of each captured process (absent: not captured).
    code: HashMap<u32, Range<u64>>,
    kernel: HashMap<u64, &'static str>,
    warnings: Vec<String>,
}

impl Symbols for FakeSymbols {
    fn is_executable(&self, pid: u32, addr: u64) -> Option<bool> {
        Some(self.code.get(&pid)?.contains(&addr))
    }
    fn symbolize_kernel(&mut self, addrs: &[u64]) -> Vec<Vec<Frame>> {
        let name = |a: &u64| {
            self.kernel
                .get(a)
                .map_or_else(|| format!("k{a:x}"), |n| n.to_string())
        };
        addrs
            .iter()
            .map(|a| {
                vec![Frame {
                    kind: FrameKind::Kernel,
                    name: name(a),
                    module: "[kernel]".into(),
                    offset: *a,
                    symbolized: true,
                    ..Frame::default()
                }]
            })
            .collect()
    }
    fn symbolize_user(&mut self, _pid: u32, addrs: &[u64]) -> Vec<Vec<Frame>> {
        addrs
            .iter()
            .map(|a| {
                vec![Frame {
                    kind: FrameKind::User,
                    // The interpreter loop's address (Python frames are spliced in its place).
                    name: if *a == EVAL {
                        EVAL_LOOP.to_string()
                    } else {
                        format!("u{a:x}")
                    },
                    module: "/bin/app".into(),
                    offset: *a,
                    symbolized: true,
                    ..Frame::default()
                }]
            })
            .collect()
    }
    fn syscall_name(&self, nr: u32) -> String {
        match nr {
            0 => "read".into(),
            1 => "write".into(),
            _ => format!("syscall_{nr}"),
        }
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

// ---- Building blocks ---------------------------------------------------------------------------

/// A complete user stack: main (0x3000) calls work (0x2000), sampled at 0x1000.
const USTACK: [u64; 3] = [0x1000, 0x2001, 0x3001];
/// The address the fake symbolizer names `_PyEval_EvalFrameDefault`.
const EVAL: u64 = 0x4000;
/// Kernel addresses as looked up (return addresses are one past these).
const K_WRITE: u64 = 0x9000_0000;
const K_DO_SYSCALL: u64 = 0x9000_0100;
const K_ENTRY: u64 = 0x9000_0200;
const K_FAULT: u64 = 0x9000_0300;
const K_NET_RX: u64 = 0x9000_0400;
/// A syscall's kernel stack, leaf first: ksys_write <- do_syscall_64 <- entry_SYSCALL_64.
const KSTACK_SYSCALL: [u64; 3] = [K_WRITE, K_DO_SYSCALL + 1, K_ENTRY + 1];

fn symbols() -> FakeSymbols {
    FakeSymbols {
        code: HashMap::from([(100, 0x1000..0x6000), (200, 0x1000..0x6000)]),
        kernel: HashMap::from([
            (K_WRITE, "ksys_write"),
            (K_DO_SYSCALL, "do_syscall_64"),
            (K_ENTRY, "entry_SYSCALL_64"),
            (K_FAULT, "handle_mm_fault"),
            (K_NET_RX, "net_rx_action"),
        ]),
        warnings: Vec::new(),
    }
}

fn served(pid: u32, comm: &str, target: bool) -> Served {
    Served {
        pid,
        tid: pid,
        cgroup_id: 0,
        comm: comm.into(),
        kthread: false,
        target,
    }
}

/// A user-mode sample of `cur_pid` serving `served`, with a complete user stack.
fn sample(cur_pid: u32, comm: &str, served: Option<Served>) -> SampleEvent {
    SampleEvent {
        cpu: 0,
        time_ns: 1_000,
        cur_pid,
        cur_tid: cur_pid,
        current_comm: comm.into(),
        served,
        hold: 0,
        context: SampleContext::User,
        orig_ax: -1,
        kstack: Vec::new(),
        ustack: USTACK.to_vec(),
        kstack_error: false,
        ustack_error: false,
        ustack_end: None,
        user_ip: 0,
        user_sp: 0,
        user_bp: 0,
        ustack_bytes: Vec::new(),
        ustack_bytes_short: false,
        build_ns: 2_000,
        python: Vec::new(),
        python_walk: pkprof_attribution::PyWalk::None,
    }
}

/// Interrupt work on `cur_pid`'s CPU, held on `hold` (0: not held, nobody known).
fn interrupt(cur_pid: u32, context: SampleContext, hold: u64, kstack: &[u64]) -> SampleEvent {
    SampleEvent {
        context,
        hold,
        kstack: kstack.to_vec(),
        ustack: Vec::new(),
        ..sample(cur_pid, "other", None)
    }
}

fn link(from: u64, to: LinkTarget) -> RingRecord {
    RingRecord::Link(LinkEvent {
        time_ns: 2_000,
        from,
        to,
    })
}

fn samples(s: impl IntoIterator<Item = SampleEvent>) -> Vec<RingRecord> {
    s.into_iter().map(RingRecord::Sample).collect()
}

/// Records until the ring is empty (one poll, then the final drain).
fn record(
    kernel: &mut FakeKernel,
    maps: &mut FakeMaps,
    targets: TargetSet,
    pids: &[u32],
    unwinding: bool,
) -> Recorded {
    Session::new(
        kernel,
        maps,
        targets,
        pids,
        Duration::from_millis(100),
        unwinding,
    )
    .run(|| Some(StopReason::CommandExited))
    .expect("recording")
}

fn meta_inputs<'a>(recorded: &'a Recorded, frame: &'a Accounting) -> meta::Inputs<'a> {
    meta::Inputs {
        pkprof_version: "0.1.0-test",
        frequency_hz: 99,
        targets: Targets {
            kind: TargetKind::Command,
            command: vec!["app".into()],
            pids: vec![100],
            cgroup: String::new(),
        },
        start_unix_ns: 1_000,
        end_unix_ns: 2_000,
        frame,
        recorded,
        kernel_lost: KernelLost::default(),
        pkprof_cpu_ns: 0,
        bpf_stats: false,
    }
}

fn assemble(recorded: &Recorded, sym: &mut FakeSymbols) -> Profile {
    let frame = recorded.last_frame.clone().unwrap_or_default();
    let meta = meta::build(meta_inputs(recorded, &frame));
    let extras = Extras {
        func_counts: Vec::new(),
        bpf_stats_unmeasured: false,
        off_cpu: None,
    };
    pkprof_recording::profile(meta, recorded, sym, extras)
}

/// Each sample group as one line, `BUCKET CONTEXT pid=P comm=C cur=P n=N | root;...;leaf`,
/// sorted.
fn groups(p: &Profile) -> Vec<String> {
    let mut out: Vec<String> = p
        .samples
        .iter()
        .map(|g| {
            let stack: Vec<&str> = p.stacks[g.stack as usize]
                .frames
                .iter()
                .map(|f| p.frames[*f as usize].name.as_str())
                .collect();
            format!(
                "{:?} {:?} pid={} comm={} cur={} n={} | {}",
                g.bucket,
                g.context,
                g.pid,
                g.comm,
                g.current_pid,
                g.count,
                stack.join(";")
            )
        })
        .collect();
    out.sort();
    out
}

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

// ---- Python frames -----------------------------------------------------------------------------

/// A CPython process (100) and one pkprof has no offsets for (200): 100's Python frames are named
/// from its code objects and each run replaces its interpreter-loop frame; a frame whose code
/// cannot be read is named so and counted; 200 stays native-only and is said once.
#[test]
fn python_runs_replace_their_interpreter_loop_frames() {
    let code = |file: &str, name: &str| CodeInfo {
        filename: format!("/srv/{file}"),
        qualname: name.into(),
        firstlineno: 1,
        linetable: Vec::new(),
        code_start: 0,
    };
    let mut maps = FakeMaps {
        python: HashMap::from([
            (
                100,
                PyDetect::Found(PyLayout {
                    version: (3, 11, 2),
                    runtime: 0x7000,
                    binary: "python3.11".into(),
                    offsets: PyOffsets::default(),
                    from_debug_offsets: false,
                }),
            ),
            (
                200,
                PyDetect::Unsupported {
                    version: "3.10.13".into(),
                    binary: "python3.10".into(),
                },
            ),
        ]),
        codes: HashMap::from([
            (0xa0, code("app.py", "<module>")),
            (0xa1, code("app.py", "pack")),
            (0xa2, code("cb.py", "on_data")),
        ]),
        ..FakeMaps::default()
    };
    let py = |code: u64, entry: bool| PyRawFrame {
        code,
        instr: 0,
        entry,
    };
    let app = served(100, "app", true);
    // Native, leaf first: u1000 <- EVAL (runs on_data) <- u2000 (a C function) <- EVAL (runs
    // <module> > pack) <- u3000.
    let native = vec![0x1000, EVAL + 1, 0x2001, EVAL + 1, 0x3001];
    let s = samples([
        SampleEvent {
            ustack: native.clone(),
            ustack_end: None,
            python: vec![py(0xa2, true), py(0xa1, false), py(0xa0, true)],
            python_walk: PyWalk::Complete,
            ..sample(100, "app", Some(app.clone()))
        },
        // The code object of on_data cannot be read: its frame says so, in its place.
        SampleEvent {
            ustack: native.clone(),
            ustack_end: None,
            python: vec![py(0xbad, true), py(0xa1, false), py(0xa0, true)],
            python_walk: PyWalk::Complete,
            ..sample(100, "app", Some(app.clone()))
        },
        SampleEvent {
            ustack: vec![0x1000, EVAL + 1, 0x3001],
            ustack_end: None,
            ..sample(200, "old", Some(served(200, "old", true)))
        },
    ]);
    let mut kernel = FakeKernel::with(vec![s]);
    let rec = record(
        &mut kernel,
        &mut maps,
        TargetSet::Kernel,
        &[100, 200],
        false,
    );
    let mut sym = symbols();
    let p = assemble(&rec, &mut sym);
    assert_eq!(
        groups(&p),
        [
            "Process User pid=100 comm=app cur=100 n=1 | u3000;app.py:<module>;app.py:pack;u2000;[unreadable Python code];u1000",
            "Process User pid=100 comm=app cur=100 n=1 | u3000;app.py:<module>;app.py:pack;u2000;cb.py:on_data;u1000",
            "Process User pid=200 comm=old cur=200 n=1 | u3000;_PyEval_EvalFrameDefault;u1000",
        ]
    );
    let f = p.frames.iter().find(|f| f.name == "app.py:pack").unwrap();
    assert_eq!(
        (f.kind, f.module.as_str()),
        (FrameKind::Python, "/srv/app.py")
    );
    let w = &p.meta.warnings;
    assert!(
        w.iter().any(|l| l.contains("pid 100: python3.11 3.11.2")),
        "{w:?}"
    );
    assert_eq!(
        w.iter()
            .filter(|l| l.contains("pid 200: python3.10 3.10.13: no structure offsets"))
            .count(),
        1,
        "{w:?}"
    );
    assert!(
        w.iter().any(|l| l.contains("1 unreadable code object")),
        "{w:?}"
    );
}

/// A process is looked at for a CPython once per image: again after an exec record (it ran a new
/// image since), not at every sample.
#[test]
fn a_process_is_looked_at_again_after_its_exec() {
    let mut maps = FakeMaps::default();
    let app = served(300, "app", true);
    let one = || SampleEvent {
        ustack: vec![0x1000],
        ..sample(300, "app", Some(app.clone()))
    };
    let mut batch = samples([one(), one()]);
    batch.push(RingRecord::Exec(300));
    batch.extend(samples([one(), one()]));
    let mut kernel = FakeKernel::with(vec![batch]);
    record(&mut kernel, &mut maps, TargetSet::Kernel, &[300], false);
    assert_eq!(maps.detections, [300, 300]);
    assert_eq!(maps.captures, [300, 300]);
}

/// A process found not Python at its first sample is looked at again when its maps change (its
/// libpython mapped by ld.so after that sample), and not again while they stay as they are.
#[test]
fn a_process_is_looked_at_again_when_its_maps_change() {
    let mut maps = FakeMaps {
        mapped_later: HashMap::from([(
            400,
            PyDetect::Unsupported {
                version: "3.10.13".into(),
                binary: "libpython3.10.so.1.0".into(),
            },
        )]),
        ..FakeMaps::default()
    };
    let app = served(400, "py", true);
    let one = || SampleEvent {
        ustack: vec![0x1000],
        ..sample(400, "py", Some(app.clone()))
    };
    let mut kernel = FakeKernel::with(vec![samples([one(), one(), one()])]);
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[400], false);
    assert_eq!(maps.detections, [400, 400]);
    let p = assemble(&rec, &mut FakeSymbols::default());
    let w = &p.meta.warnings;
    assert_eq!(
        w.iter()
            .filter(|l| l.contains("pid 400: libpython3.10.so.1.0 3.10.13: no structure offsets"))
            .count(),
        1,
        "{w:?}"
    );
}

/// Off-CPU samples carry Python frames as cpu-clock samples do: spliced in place of their
/// interpreter-loop frame, and counted in the profile's warnings when they do not match it.
#[test]
fn off_cpu_samples_splice_their_python_frames() {
    let mut maps = FakeMaps {
        python: HashMap::from([(
            100,
            PyDetect::Found(PyLayout {
                version: (3, 11, 2),
                runtime: 0x7000,
                binary: "python3.11".into(),
                offsets: PyOffsets::default(),
                from_debug_offsets: false,
            }),
        )]),
        codes: HashMap::from([(
            0xa1,
            CodeInfo {
                filename: "/srv/app.py".into(),
                qualname: "nap".into(),
                firstlineno: 1,
                linetable: Vec::new(),
                code_start: 0,
            },
        )]),
        ..FakeMaps::default()
    };
    let app = served(100, "app", true);
    let off = |ustack: Vec<u64>| {
        RingRecord::OffCpu(Box::new(pkprof_attribution::OffCpuEvent {
            sample: SampleEvent {
                ustack,
                ustack_end: None,
                python: vec![PyRawFrame {
                    code: 0xa1,
                    instr: 0,
                    entry: true,
                }],
                python_walk: PyWalk::Complete,
                ..sample(100, "app", Some(app.clone()))
            },
            off_ns: 0,
            offcpu_ns: 20_000_000,
            blocked_ns: 20_000_000,
            weight_ns: 20_000_000,
            reason: pkprof_profile::BlockReason::Sleep,
            chain: Vec::new(),
            waker_kstack: Vec::new(),
            waker_ustack: Vec::new(),
        }))
    };
    // Leaf first: u1000 (libc's sleep) <- EVAL (runs nap) <- u3000; then a stack without its
    // loop frame (cut short): its Python frame goes at the root and the sample is counted.
    let batch = vec![off(vec![0x1000, EVAL + 1, 0x3001]), off(vec![0x1000])];
    let mut kernel = FakeKernel::with(vec![batch]);
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[100], false);
    let mut sym = symbols();
    let frame = rec.last_frame.clone().unwrap_or_default();
    let meta = meta::build(meta_inputs(&rec, &frame));
    let extras = Extras {
        func_counts: Vec::new(),
        bpf_stats_unmeasured: false,
        off_cpu: Some(pkprof_profile::OffCpu::default()),
    };
    let p = pkprof_recording::profile(meta, &rec, &mut sym, extras);
    let off = p.off_cpu.as_ref().expect("off-CPU groups");
    let mut stacks: Vec<String> = off
        .groups
        .iter()
        .map(|g| {
            p.stack_frames(g.stack)
                .map(|f| f.name.clone())
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect();
    stacks.sort();
    assert_eq!(stacks, ["app.py:nap;u1000", "u3000;app.py:nap;u1000"]);
    let w = &p.meta.warnings;
    assert!(
        w.iter()
            .any(|l| l.contains("1 not matching the native stack")),
        "{w:?}"
    );
}

#[test]
fn a_kernel_thread_waker_is_not_labelled_as_in_a_system_call() {
    let mut maps = FakeMaps::default();
    let app = served(100, "app", true);
    let woken_by = |pid: u32, comm: &str, kthread: bool| {
        RingRecord::OffCpu(Box::new(pkprof_attribution::OffCpuEvent {
            sample: SampleEvent {
                ustack: vec![0x1000],
                ..sample(100, "app", Some(app.clone()))
            },
            off_ns: 0,
            offcpu_ns: 1_000_000,
            blocked_ns: 1_000_000,
            weight_ns: 1_000_000,
            reason: pkprof_profile::BlockReason::Io,
            chain: vec![pkprof_attribution::WakerEvent {
                pid,
                tid: pid,
                comm: comm.into(),
                context: SampleContext::Kernel,
                kthread,
                blocked: None,
            }],
            waker_kstack: Vec::new(),
            waker_ustack: Vec::new(),
        }))
    };
    let batch = vec![
        woken_by(7, "kworker/0:1", true),
        woken_by(200, "writer", false),
    ];
    let mut kernel = FakeKernel::with(vec![batch]);
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[100], false);
    let mut sym = symbols();
    let frame = rec.last_frame.clone().unwrap_or_default();
    let meta = meta::build(meta_inputs(&rec, &frame));
    let extras = Extras {
        func_counts: Vec::new(),
        bpf_stats_unmeasured: false,
        off_cpu: Some(pkprof_profile::OffCpu::default()),
    };
    let p = pkprof_recording::profile(meta, &rec, &mut sym, extras);
    let off = p.off_cpu.as_ref().expect("off-CPU groups");
    let mut wakers: Vec<(String, pkprof_profile::Context)> = off
        .groups
        .iter()
        .flat_map(|g| g.chain.iter().map(|w| (w.comm.clone(), w.context)))
        .collect();
    wakers.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        wakers,
        [
            (
                "kworker/0:1".to_string(),
                pkprof_profile::Context::KernelTask
            ),
            ("writer".to_string(), pkprof_profile::Context::Syscall),
        ]
    );
}
