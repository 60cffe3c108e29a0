//! The recording loop: reads samples and links from the ring buffer, holds samples whose
//! beneficiary is not known yet, labels the rest, captures each sampled process's memory maps
//! while it is alive, and reads the exact accounting once a second. The kernel side and the
//! processes' maps come through [`KernelSource`] and [`ProcessMaps`]; when to stop is the
//! caller's (a closure asked between polls).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pkprof_accounting::{Accountant, Filter, Interval, SelfUsage, Snapshot, SyscallCount};
use pkprof_attribution::{
    Holds, OffCpuEvent, Resolution, SampleContext, SampleEvent, Served, TargetSet, Truncation,
};
use pkprof_profile::ProcessInfo;

use crate::aggregate::{Aggregate, Labels, OffLabels, RawStack, WakeLabel};
use crate::costs::SampleCosts;
use crate::python::{PyFrameRef, Python, PythonStats};
use crate::sources::{KernelSource, ProcessMaps, RingRecord, UserRegs};

/// Why recording stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Duration,
    Interrupted,
    CommandExited,
    TargetsGone,
}

/// Everything the loop gathered, for assembly into a profile.
pub struct Recorded {
    pub aggregate: Aggregate,
    pub processes: BTreeMap<u32, ProcessInfo>,
    pub last_frame: Option<Arc<Interval>>,
    /// Every exact syscall count of the last accounting read (`--syscalls`): all of them, where
    /// the frame keeps only the most frequent for `top`'s display.
    pub syscalls: Vec<SyscallCount>,
    pub held_expired: u64,
    pub undecodable: u64,
    /// Off-CPU samples read (`record --off-cpu`).
    pub off_samples: u64,
    pub kstack_errors: u64,
    pub ustack_errors: u64,
    pub maps_missing: u64,
    /// Own time of target threads that found the thread table full, at the last read.
    pub untracked_target_ns: u64,
    pub costs: SampleCosts,
    pub stop: StopReason,
    /// How the CPython frames of the samples went (docs/design.md, "Python frames").
    pub python: PythonStats,
}

/// What stopped a recording early: reading the kernel side failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError<E: std::error::Error + 'static> {
    #[error("reading samples")]
    OpenRing(#[source] E),
    /// Polling or draining the ring buffer (the source's own message says which).
    #[error(transparent)]
    Ring(E),
    #[error("reading the accounting")]
    Accounting(#[source] E),
}

/// The recording loop over a kernel source `K` and the processes' maps `M`.
pub struct Session<'a, K: KernelSource, M: ProcessMaps> {
    kernel: &'a mut K,
    maps: &'a mut M,
    targets: TargetSet,
    holds: Holds<SampleEvent>,
    rec: Recorded,
    accountant: Accountant,
    /// Processes sampled so far and whether their maps were captured; the kernel side knows
    /// them all as captured (see `KernelSource::mark_captured`).
    captures: HashMap<u32, bool>,
    /// Every process known to have been a target (TargetSet::Kernel): the kernel's target set
    /// holds only those alive, so the ones seen in it, in thread entries and given are kept here.
    target_pids: HashSet<u32>,
    /// The kernel's thread table may fill up before the next read at the usual pace.
    table_busy: bool,
    /// Samples carry user stack bytes to unwind (`record --stack-bytes` > 0).
    unwinding: bool,
    /// When the accounting was last read, and the thread table's lost count then.
    last_read: Instant,
    last_thread_map_full: u64,
    /// When the accounting is read next (`step`).
    next_read: Instant,
    /// Held samples expired before the current window (`take_window`).
    expired_before: u64,
    /// Ring records being handled (kept to reuse its memory).
    batch: Vec<RingRecord>,
    /// How long one `step` waits for ring records.
    poll_every: Duration,
    /// How often `step` reads the accounting when the thread table is not filling up.
    read_every: Duration,
    python: Python,
    /// Reads of the accounting so far (`frames_read`).
    frames_read: u64,
    /// Processes whose CPython layout the kernel side was given (and not told to forget).
    python_in_kernel: HashSet<u32>,
}

/// How often the exact accounting is read, and with it exited threads are freed from the kernel's
/// thread table (a thread's entry is freed at the first read after its exit).
const READ_EVERY: Duration = Duration::from_secs(1);
/// ... when the thread table would be half full by the next read at the usual pace (entries now,
/// plus exits at the rate of the last interval), or has overflowed since the last read, so that
/// exits are freed before it fills.
const READ_EVERY_BUSY: Duration = Duration::from_millis(100);

impl<'a, K: KernelSource, M: ProcessMaps> Session<'a, K, M> {
    /// `pids`: the targets given or started (TargetSet::Kernel); `tag_expire`: how long the
    /// kernel holds a tag's time; `unwinding`: samples carry user stack bytes to unwind.
    pub fn new(
        kernel: &'a mut K,
        maps: &'a mut M,
        targets: TargetSet,
        pids: &[u32],
        tag_expire: Duration,
        unwinding: bool,
    ) -> Self {
        let accountant = Accountant::new(false, Filter::default(), kernel.attach_mono_ns());
        Session {
            kernel,
            maps,
            targets,
            // Held samples wait as long as the kernel holds their time, plus a margin for the
            // links still in the ring buffer.
            holds: Holds::new(tag_expire.as_nanos() as u64 * 2),
            rec: Recorded {
                aggregate: Aggregate::default(),
                processes: BTreeMap::new(),
                last_frame: None,
                syscalls: Vec::new(),
                held_expired: 0,
                undecodable: 0,
                off_samples: 0,
                kstack_errors: 0,
                ustack_errors: 0,
                maps_missing: 0,
                untracked_target_ns: 0,
                costs: SampleCosts::default(),
                stop: StopReason::Duration,
                python: PythonStats::default(),
            },
            accountant,
            captures: HashMap::new(),
            target_pids: pids.iter().copied().collect(),
            table_busy: false,
            unwinding,
            last_read: Instant::now(),
            last_thread_map_full: 0,
            next_read: Instant::now(),
            expired_before: 0,
            batch: Vec::new(),
            poll_every: Duration::from_millis(50),
            read_every: READ_EVERY,
            python: Python::default(),
            frames_read: 0,
            python_in_kernel: HashSet::new(),
        }
    }

    /// How long each `step` waits for ring records (default 50 ms): the agent, which samples
    /// slowly and answers control requests between steps, wakes less often.
    pub fn with_poll_every(mut self, every: Duration) -> Self {
        self.poll_every = every;
        self
    }

    /// How often `step` reads the accounting (default READ_EVERY, 1 s; sooner while the thread
    /// table fills up). The per-exit harness (the CLI crate's `examples/per_exit.rs`) reads at
    /// every step.
    pub fn with_read_every(mut self, every: Duration) -> Self {
        self.read_every = every;
        self
    }

    /// Bounds the samples kept until the next window (the agent): at most `max_stacks` distinct
    /// stacks and `max_groups` (stack, labels) groups; samples beyond them are counted as dropped.
    pub fn with_limits(mut self, max_stacks: usize, max_groups: usize) -> Self {
        self.rec.aggregate = Aggregate::bounded(Some((max_stacks, max_groups)));
        self
    }

    /// Whether CPython processes are looked for (`record --no-python`: not), and whether their
    /// frames carry their source line (`record --lines`).
    pub fn python(mut self, on: bool, lines: bool) -> Self {
        self.python.enabled = on;
        self.python.lines = lines;
        self
    }

    /// When to read the accounting next: sooner while the thread table is filling up.
    fn next_read_at(&self) -> Instant {
        Instant::now()
            + if self.table_busy {
                READ_EVERY_BUSY
            } else {
                self.read_every
            }
    }

    /// Runs until `stop` (asked after each poll of about 50 ms) gives a reason; then drains
    /// what is left.
    pub fn run(
        mut self,
        mut stop: impl FnMut() -> Option<StopReason>,
    ) -> Result<Recorded, SessionError<K::Error>> {
        self.start()?;
        let reason = loop {
            self.step()?;
            if let Some(reason) = stop() {
                break reason;
            }
        };
        self.finish(reason)
    }

    /// Starts reading the ring buffer (what `run` does first; the agent drives the steps itself).
    pub fn start(&mut self) -> Result<(), SessionError<K::Error>> {
        self.kernel.open_ring().map_err(SessionError::OpenRing)?;
        self.next_read = self.next_read_at();
        Ok(())
    }

    /// One poll of the ring buffer (`with_poll_every`, 50 ms by default), and the accounting read
    /// when it is due.
    pub fn step(&mut self) -> Result<(), SessionError<K::Error>> {
        let mut batch = std::mem::take(&mut self.batch);
        let polled = self.kernel.poll(self.poll_every, &mut batch);
        self.handle(&mut batch);
        self.batch = batch;
        polled.map_err(SessionError::Ring)?;
        if Instant::now() >= self.next_read {
            self.read_accounting()?;
            self.next_read = self.next_read_at();
            let now = self.kernel.now_ns();
            for (s, r) in self.holds.sweep(now) {
                self.resolved(s, r);
            }
        }
        Ok(())
    }

    /// Ends a window (the agent, docs/design.md "The agent"): reads the accounting now and hands
    /// over what was gathered since the last window: the samples and this window's counts; the
    /// processes with their totals since attach (exited ones are then forgotten). Held samples
    /// stay held for the next window.
    pub fn take_window(&mut self) -> Result<Recorded, SessionError<K::Error>> {
        self.read_accounting()?;
        self.next_read = self.next_read_at();
        let expired = self.holds.expired();
        let limits = self.rec.aggregate.limits();
        // The window takes the table; the live processes stay (exited ones are forgotten, and
        // under a fork loop they are nearly all of it).
        let live = (self.rec.processes.iter())
            .filter(|(_, p)| !p.exited)
            .map(|(pid, p)| (*pid, p.clone()))
            .collect();
        let fresh = Recorded {
            aggregate: Aggregate::bounded(limits),
            processes: live,
            last_frame: self.rec.last_frame.clone(),
            syscalls: Vec::new(),
            held_expired: 0,
            undecodable: 0,
            kstack_errors: 0,
            ustack_errors: 0,
            maps_missing: 0,
            untracked_target_ns: self.rec.untracked_target_ns,
            costs: SampleCosts::default(),
            stop: StopReason::Duration,
            python: PythonStats::default(),
            off_samples: 0,
        };
        let mut window = std::mem::replace(&mut self.rec, fresh);
        window.python = std::mem::take(&mut self.python.stats);
        let exited: Vec<u32> = (window.processes.iter())
            .filter(|(_, p)| p.exited)
            .map(|(pid, _)| *pid)
            .collect();
        let live = &self.rec.processes;
        self.captures.retain(|pid, _| live.contains_key(pid));
        // An exited process's Python layout goes too: its PID may come back as another program.
        for pid in exited {
            self.python.forget(pid);
            // Its captured areas are not a process that reuses its PID.
            self.maps.executed(pid);
            // One system call per exited process given a layout, not per exited process (the
            // agent meets thousands a window under a fork loop).
            if self.python_in_kernel.remove(&pid) {
                self.kernel
                    .forget_python(pid)
                    .map_err(SessionError::Accounting)?;
            }
        }
        window.held_expired = expired - self.expired_before;
        self.expired_before = expired;
        Ok(window)
    }

    /// The kernel side, between steps (the agent reads its loss counts at a window's end).
    pub fn kernel_mut(&mut self) -> &mut K {
        self.kernel
    }

    /// The processes' maps and symbolizer, between steps (the agent symbolizes each window).
    pub fn maps_mut(&mut self) -> &mut M {
        self.maps
    }

    /// The accounting's latest read (totals since attach), for live outputs.
    pub fn last_frame(&self) -> Option<&Interval> {
        self.rec.last_frame.as_deref()
    }

    /// The same, shared (live outputs keep it without copying).
    pub fn last_frame_shared(&self) -> Option<&Arc<Interval>> {
        self.rec.last_frame.as_ref()
    }

    /// How many times the accounting was read: a live output that must see every frame once
    /// (the Prometheus exposition settles exited processes from the frame that shows them
    /// exited) takes `last_frame` when this changed.
    pub fn frames_read(&self) -> u64 {
        self.frames_read
    }

    /// Samples and stack groups in memory now, and samples dropped by the aggregate's limits.
    pub fn aggregate_size(&self) -> (usize, usize, u64) {
        let a = &self.rec.aggregate;
        (a.stacks().len(), a.group_count(), a.dropped())
    }

    /// Drops the samples gathered since the last window (`pkprof ctl reset`).
    pub fn reset_window(&mut self) {
        let limits = self.rec.aggregate.limits();
        self.rec.aggregate = Aggregate::bounded(limits);
    }

    /// Drains what is left in the ring buffer, stops reading it and hands over the recording.
    pub fn finish(mut self, reason: StopReason) -> Result<Recorded, SessionError<K::Error>> {
        let mut batch = std::mem::take(&mut self.batch);
        self.kernel.drain(&mut batch).map_err(SessionError::Ring)?;
        self.handle(&mut batch);
        self.kernel.close_ring();
        self.read_accounting()?;
        for (s, r) in self.holds.drain() {
            self.resolved(s, r);
        }
        self.rec.held_expired = self.holds.expired() - self.expired_before;
        self.rec.stop = reason;
        self.rec.python = std::mem::take(&mut self.python.stats);
        Ok(self.rec)
    }

    fn handle(&mut self, batch: &mut Vec<RingRecord>) {
        for ev in batch.drain(..) {
            match ev {
                RingRecord::Sample(s) => self.sample(s),
                RingRecord::Link(l) => {
                    for (s, r) in self.holds.link(&l) {
                        self.resolved(s, r);
                    }
                }
                RingRecord::OffCpu(o) => self.off_cpu(*o),
                RingRecord::Exec(pid) => self.exec(pid),
                RingRecord::Undecodable => self.rec.undecodable += 1,
            }
        }
    }

    /// An off-CPU sample: its blocked stack unwound as a sample's, its waker's stacks interned,
    /// labelled like a sample of the thread it blocked (it served itself).
    fn off_cpu(&mut self, mut o: OffCpuEvent) {
        self.rec.kstack_errors += o.sample.kstack_error as u64;
        self.rec.ustack_errors += o.sample.ustack_error as u64;
        if !o.sample.ustack.is_empty() {
            let checked = if self.unwinding {
                1
            } else {
                o.sample.ustack.len()
            };
            self.capture(o.sample.cur_pid, &o.sample.ustack[..checked]);
        }
        if o.sample.user_sp != 0 && self.unwinding {
            self.unwind(&mut o.sample);
        }
        let waker_pid = o.chain.first().map_or(0, |w| w.pid);
        let waker_stack = (!o.waker_kstack.is_empty() || !o.waker_ustack.is_empty()).then(|| {
            if !o.waker_ustack.is_empty() {
                self.capture(waker_pid, &o.waker_ustack);
            }
            let end = (!o.waker_ustack.is_empty()).then(|| Truncation::frame_pointer_walk(false));
            self.rec.aggregate.stack_id(RawStack {
                user_pid: waker_pid,
                ustack: std::mem::take(&mut o.waker_ustack),
                kstack: std::mem::take(&mut o.waker_kstack),
                end,
                python: Vec::new(),
            })
        });
        let waker_stack = waker_stack.flatten();
        let chain = o
            .chain
            .iter()
            .map(|w| WakeLabel {
                pid: w.pid,
                tid: w.tid,
                comm: w.comm.clone(),
                context: w.context,
                kthread: w.kthread,
                blocked: w.blocked.map(|(_, r)| r),
            })
            .collect();
        let chain_ns: Vec<u64> = o
            .chain
            .iter()
            .map(|w| w.blocked.map_or(0, |(ns, _)| ns))
            .collect();
        let served = o.sample.served.clone();
        let (stack, labels) = self.labels(o.sample, served);
        let labels = OffLabels {
            labels,
            reason: o.reason,
            waker_stack,
            chain,
        };
        self.rec.off_samples += 1;
        self.rec
            .aggregate
            .add_off(stack, labels, o.weight_ns, &chain_ns);
    }

    fn sample(&mut self, mut s: SampleEvent) {
        self.rec.kstack_errors += s.kstack_error as u64;
        self.rec.ustack_errors += s.ustack_error as u64;
        self.rec.costs.build.add(u64::from(s.build_ns));
        let first = !self.captures.contains_key(&s.cur_pid);
        let start = Instant::now();
        if !s.ustack.is_empty() {
            // Unwinding checks its own frames; the frame-pointer walk's may be garbage.
            let checked = if self.unwinding { 1 } else { s.ustack.len() };
            self.capture(s.cur_pid, &s.ustack[..checked]);
        }
        if s.user_sp != 0 && self.unwinding {
            let unwind_start = Instant::now();
            self.unwind(&mut s);
            let costs = &mut self.rec.costs;
            costs.unwind.add(unwind_start.elapsed().as_nanos() as u64);
            if first {
                // Maps captured and the process's tables built: what its first sample waited.
                costs.processes += 1;
                costs.slowest_first = costs.slowest_first.max(start.elapsed());
            }
        }
        if s.hold != 0 {
            self.holds.hold(s.hold, s.time_ns, s);
        } else {
            let served = s.served.clone();
            self.label(s, served);
        }
    }

    /// Snapshots the process's maps the first time it is sampled (and again when code appears
    /// outside them: every address of the stack is checked, since return addresses outside the
    /// maps cut the stack at assembly), while it is alive.
    fn capture(&mut self, pid: u32, ustack: &[u64]) {
        let captured = match self.captures.get(&pid) {
            Some(ok) => *ok,
            None => {
                let ok = match self.maps.capture_process(pid) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::info!("{e}");
                        false
                    }
                };
                self.captures.insert(pid, ok);
                // Its next samples need not wake us (a failed capture will not succeed later).
                if let Err(e) = self.kernel.mark_captured(pid) {
                    tracing::info!("{e}");
                }
                self.find_python(pid);
                ok
            }
        };
        if captured {
            for addr in ustack {
                if self.unwinding {
                    // The sampled ip: code for sure.
                    self.maps.ensure_code_mapped(pid, *addr);
                } else {
                    self.maps.ensure_mapped(pid, *addr);
                }
            }
            self.find_python(pid); // its maps may have changed
        } else {
            self.rec.maps_missing += 1;
        }
    }

    /// Unwinds the sample's user stack from its copied bytes (docs/design.md, "User stacks"),
    /// replacing the frame-pointer walk, while the process's maps are at hand; the bytes are
    /// dropped. Code that appears in the unwound frames (dlopen) is captured for later samples.
    fn unwind(&mut self, s: &mut SampleEvent) {
        let regs = UserRegs {
            ip: s.user_ip,
            sp: s.user_sp,
            bp: s.user_bp,
        };
        let bytes = std::mem::take(&mut s.ustack_bytes);
        let unwound = self
            .maps
            .unwind(s.cur_pid, regs, &bytes, !s.ustack_bytes_short, &s.ustack);
        // A walk that stopped at a return address outside the maps may have met code mapped
        // since they were read (dlopen): have them re-read (rate-limited) for the next samples.
        if let Some(addr) = unwound.unmapped {
            if self.captures.get(&s.cur_pid) == Some(&true) {
                self.maps
                    .ensure_code_mapped(s.cur_pid, addr.saturating_sub(1));
                self.find_python(s.cur_pid);
            }
        }
        s.ustack = unwound.frames;
        s.ustack_end = unwound.end;
    }

    /// `pid`, looked at before, ran a new image: it is looked at again at its next sample, for
    /// a CPython too (the kernel side has forgotten its layout). Its captured maps stay: they
    /// name its samples from before the exec, and code outside them is captured as it appears.
    fn exec(&mut self, pid: u32) {
        self.captures.remove(&pid);
        self.maps.executed(pid);
        self.python.forget(pid);
        // Not `kernel.forget_python` here: the exec record is read after samples of the new
        // image may already have had it detected and its layout set (forgetting it then left
        // `fib_depth_debian_3_11` with 0 of 200 samples at the right depth).
    }

    /// Looks for a CPython in `pid` once per image (and again when its maps changed since it was
    /// found not Python: the exec's first sample can come before ld.so maps libpython), and hands
    /// what it found to the kernel side.
    fn find_python(&mut self, pid: u32) {
        if !self.python.enabled {
            return;
        }
        let generation = self.maps.maps_generation(pid);
        if self.python.known(pid) && !self.python.look_again(pid, generation) {
            return;
        }
        let found = self.maps.detect_python(pid);
        if let Some(layout) = self.python.found(pid, found, generation) {
            match self.kernel.set_python(pid, layout) {
                Ok(()) => {
                    self.python_in_kernel.insert(pid);
                }
                Err(e) => tracing::info!("{e}"),
            }
        }
    }

    /// Names a sample's Python frames from its process's memory, now that it is labelled (task
    /// context: never held, so the process is alive and the frames are as sampled, give or take
    /// the ring's delay).
    fn python_frames(&mut self, s: &SampleEvent) -> Vec<PyFrameRef> {
        if s.python_walk == pkprof_attribution::PyWalk::None {
            return Vec::new();
        }
        *self.python.stats.walks.entry(s.python_walk).or_default() += 1;
        let mut out = Vec::with_capacity(s.python.len());
        let mut unnamed = false;
        for raw in &s.python {
            let maps = &mut *self.maps;
            let pid = s.cur_pid;
            let frame = self
                .python
                .code(pid, raw.code, |o| maps.python_code(pid, o, raw.code))
                .cloned()
                .map(|code| self.python.frame(&code, raw));
            // A code object that cannot be read (the process exited, a corrupt pointer) keeps
            // its place, so that the runs still match the loop frames, under a name that says so.
            unnamed |= frame.is_none();
            let frame = frame.unwrap_or_else(crate::python::unreadable_frame);
            out.push(PyFrameRef {
                id: self.rec.aggregate.python_frame(frame),
                entry: raw.entry,
            });
        }
        self.python.stats.unnamed += u64::from(unnamed);
        out
    }

    fn resolved(&mut self, s: SampleEvent, r: Resolution) {
        let served = match r {
            Resolution::Thread(t) => Some(t),
            Resolution::Kernel | Resolution::Expired => None,
        };
        self.label(s, served);
    }

    fn label(&mut self, s: SampleEvent, served: Option<Served>) {
        let (stack, labels) = self.labels(s, served);
        self.rec.aggregate.add(stack, labels);
    }

    /// A sample's raw stack and labels.
    fn labels(&mut self, s: SampleEvent, served: Option<Served>) -> (RawStack, Labels) {
        let python = self.python_frames(&s);
        let bucket = self.targets.bucket(s.context, served.as_ref());
        let syscall = (s.context == SampleContext::Kernel && (0..4096).contains(&s.orig_ax))
            .then_some(s.orig_ax as u32);
        let labels = Labels {
            served,
            current_pid: s.cur_pid,
            current_comm: s.current_comm,
            bucket,
            context: s.context,
            syscall,
        };
        let stack = RawStack {
            user_pid: s.cur_pid,
            ustack: s.ustack,
            kstack: s.kstack,
            end: s.ustack_end,
            python,
        };
        (stack, labels)
    }

    /// Decides from a read whether the thread table needs reading sooner (see READ_EVERY_BUSY).
    fn note_table_use(&mut self, snap: &Snapshot) {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last_read).as_secs_f64().max(0.01);
        // The short-lived fold's threads are not in `threads` (Snapshot::unshown).
        let u = snap.unshown;
        let exits = (snap.threads.iter().filter(|t| t.exited).count() + u.folded) as f64;
        let walked = (snap.threads.len() + u.folded + u.held) as f64;
        let expected = walked + exits * READ_EVERY.as_secs_f64() / elapsed;
        self.table_busy = expected * 2.0 >= f64::from(self.kernel.max_threads())
            || snap.lost.thread_map_full > self.last_thread_map_full;
        self.last_read = now;
        self.last_thread_map_full = snap.lost.thread_map_full;
    }

    /// Exact CPU time per process so far (exited processes keep their last totals).
    fn read_accounting(&mut self) -> Result<(), SessionError<K::Error>> {
        let snap = self.kernel.snapshot().map_err(SessionError::Accounting)?;
        self.note_table_use(&snap);
        self.rec.untracked_target_ns = self
            .kernel
            .untracked_target_ns()
            .map_err(SessionError::Accounting)?;
        if let TargetSet::Kernel = self.targets {
            self.target_pids.extend(self.kernel.targets());
            self.target_pids
                .extend(snap.threads.iter().filter(|t| t.target).map(|t| t.pid));
        }
        let frame = self.accountant.update(&snap, SelfUsage::default());
        self.rec.syscalls.clone_from(&snap.syscalls);
        for r in &frame.rows {
            let t = &r.total;
            let p = self.rec.processes.entry(r.pid).or_default();
            p.pid = r.pid;
            p.ppid = r.ppid;
            p.comm = r.comm.clone();
            p.exited |= r.exited;
            p.task_ns = t.own_ns();
            p.user_ns = t.user_ns;
            p.sys_ns = t.sys_ns;
            p.hardirq_ns = t.hardirq_ns;
            p.softirq_ns = t.softirq_ns.iter().sum();
            p.served_ns = t.served_total_ns();
            if r.kthread {
                p.exe = "[kernel thread]".into();
            } else if p.exe.is_empty() && r.pid != pkprof_accounting::SHORT_LIVED_PID {
                if let Some(exe) = self.maps.exe(r.pid, !r.exited) {
                    p.exe = exe;
                }
            }
            if !r.kthread {
                p.target = match &mut self.targets {
                    TargetSet::System => true,
                    TargetSet::Kernel => p.target || self.target_pids.contains(&r.pid),
                    TargetSet::Cgroup(tree) => p.target || tree.contains(r.cgroup_id),
                };
            }
        }
        self.rec.last_frame = Some(Arc::new(frame));
        self.frames_read += 1;
        Ok(())
    }
}
