//! Fakes of the kernel side, the processes' maps and the symbolizer, and the building blocks
//! (samples, links, a recording, its profile as sorted lines) that the recording pipeline's
//! tests share (pipeline.rs, pipeline_python.rs). The fake symbolizer names a user address
//! `u<hex>` and a kernel address by a small table (else `k<hex>`); return addresses (every frame
//! but the leaf) are looked up one byte earlier, so stacks use callers ending in 1:
//! `[0x1000, 0x2001, 0x3001]` reads `u3000;u2000;u1000` root first.

#![allow(dead_code)] // each test crate uses its own part of them

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;
use std::time::Duration;

use pkprof_accounting::{Interval as Accounting, Snapshot};
use pkprof_attribution::{LinkEvent, LinkTarget, SampleContext, SampleEvent, Served, TargetSet};
use pkprof_profile::{Frame, FrameKind, Profile, TargetKind, Targets, Truncation};
use pkprof_recording::meta::{self, KernelLost};
use pkprof_recording::python::{CodeInfo, PyDetect, PyOffsets, EVAL_LOOP};
use pkprof_recording::{
    Extras, KernelSource, ProcessMaps, Recorded, RingRecord, Session, StopReason, Symbols,
    UnwoundStack, UserRegs,
};

// ---- Fakes -------------------------------------------------------------------------------------

#[derive(Debug)]
pub(crate) struct FakeError(&'static str);

impl std::fmt::Display for FakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for FakeError {}

/// The kernel side: each poll hands over the next batch, the final drain what is left.
#[derive(Default)]
pub(crate) struct FakeKernel {
    pub(crate) batches: VecDeque<Vec<RingRecord>>,
    pub(crate) snapshot: Snapshot,
    pub(crate) targets: Vec<u32>,
    pub(crate) untracked_target_ns: u64,
    pub(crate) marked: Vec<u32>,
    pub(crate) ring_open: bool,
    pub(crate) fail_ring: bool,
    pub(crate) fail_snapshot: bool,
}

impl FakeKernel {
    pub(crate) fn with(batches: Vec<Vec<RingRecord>>) -> Self {
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
pub(crate) struct UnwindCall {
    pub(crate) pid: u32,
    pub(crate) regs: UserRegs,
    pub(crate) stack: Vec<u8>,
    pub(crate) window_full: bool,
    pub(crate) fp_chain: Vec<u64>,
}

#[derive(Default)]
pub(crate) struct FakeMaps {
    /// Processes whose maps cannot be captured.
    pub(crate) uncapturable: HashSet<u32>,
    pub(crate) captures: Vec<u32>,
    /// (pid, address, known to be code)
    pub(crate) ensured: Vec<(u32, u64, bool)>,
    pub(crate) unwound: HashMap<u32, UnwoundStack>,
    pub(crate) unwinds: Vec<UnwindCall>,
    pub(crate) exes: HashMap<u32, String>,
    /// What `detect_python` finds per process (absent: not Python), and the code objects.
    pub(crate) python: HashMap<u32, PyDetect>,
    pub(crate) codes: HashMap<u64, CodeInfo>,
    /// The processes `detect_python` was asked about, in order.
    pub(crate) detections: Vec<u32>,
    /// Each process's maps generation (absent: not captured); an `ensure_*mapped` of a process
    /// in `mapped_later` bumps it and makes `detect_python` find that (ld.so mapping
    /// libpython after the exec's first sample).
    pub(crate) generations: HashMap<u32, u64>,
    pub(crate) mapped_later: HashMap<u32, PyDetect>,
    /// The processes the session said ran a new image or exited (`executed`), in order.
    pub(crate) executed: Vec<u32>,
}

impl FakeMaps {
    /// The re-capture of an `ensure_*mapped` finds `mapped_later`'s code, once.
    pub(crate) fn map_later(&mut self, pid: u32) {
        if let Some(d) = self.mapped_later.remove(&pid) {
            self.python.insert(pid, d);
            *self.generations.entry(pid).or_default() += 1;
        }
    }
}

impl ProcessMaps for FakeMaps {
    type Error = String;

    fn executed(&mut self, pid: u32) {
        self.executed.push(pid);
    }

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
pub(crate) struct FakeSymbols {
    /// The executable range of each captured process (absent: not captured).
    pub(crate) code: HashMap<u32, Range<u64>>,
    pub(crate) kernel: HashMap<u64, &'static str>,
    pub(crate) warnings: Vec<String>,
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
pub(crate) const USTACK: [u64; 3] = [0x1000, 0x2001, 0x3001];
/// The address the fake symbolizer names `_PyEval_EvalFrameDefault`.
pub(crate) const EVAL: u64 = 0x4000;
/// Kernel addresses as looked up (return addresses are one past these).
pub(crate) const K_WRITE: u64 = 0x9000_0000;
pub(crate) const K_DO_SYSCALL: u64 = 0x9000_0100;
pub(crate) const K_ENTRY: u64 = 0x9000_0200;
pub(crate) const K_FAULT: u64 = 0x9000_0300;
pub(crate) const K_NET_RX: u64 = 0x9000_0400;
/// A syscall's kernel stack, leaf first: ksys_write <- do_syscall_64 <- entry_SYSCALL_64.
pub(crate) const KSTACK_SYSCALL: [u64; 3] = [K_WRITE, K_DO_SYSCALL + 1, K_ENTRY + 1];

pub(crate) fn symbols() -> FakeSymbols {
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

pub(crate) fn served(pid: u32, comm: &str, target: bool) -> Served {
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
pub(crate) fn sample(cur_pid: u32, comm: &str, served: Option<Served>) -> SampleEvent {
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
pub(crate) fn interrupt(
    cur_pid: u32,
    context: SampleContext,
    hold: u64,
    kstack: &[u64],
) -> SampleEvent {
    SampleEvent {
        context,
        hold,
        kstack: kstack.to_vec(),
        ustack: Vec::new(),
        ..sample(cur_pid, "other", None)
    }
}

pub(crate) fn link(from: u64, to: LinkTarget) -> RingRecord {
    RingRecord::Link(LinkEvent {
        time_ns: 2_000,
        from,
        to,
    })
}

pub(crate) fn samples(s: impl IntoIterator<Item = SampleEvent>) -> Vec<RingRecord> {
    s.into_iter().map(RingRecord::Sample).collect()
}

/// Records until the ring is empty (one poll, then the final drain).
pub(crate) fn record(
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

pub(crate) fn meta_inputs<'a>(recorded: &'a Recorded, frame: &'a Accounting) -> meta::Inputs<'a> {
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

pub(crate) fn assemble(recorded: &Recorded, sym: &mut FakeSymbols) -> Profile {
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
pub(crate) fn groups(p: &Profile) -> Vec<String> {
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
