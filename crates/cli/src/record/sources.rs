//! The real sources of `pkprof_recording`'s traits: the BPF collector as the kernel side, the
//! symbolizer as the processes' maps and the namer of addresses. Every use of `pkprof-collect`
//! and `pkprof-symbolize` by the recording pipeline is here.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use pkprof_accounting::Snapshot;
use pkprof_collect::{CollectError, Collector, PyProc};
use pkprof_collect::{EventRing, RecordEvent};
use pkprof_profile::Frame;
use pkprof_recording::python::{CodeInfo, PyDetect, PyLayout, PyOffsets};
use pkprof_recording::{KernelSource, ProcessMaps, RingRecord, Symbols, UnwoundStack, UserRegs};
use pkprof_symbolize::{SymbolizeError, Symbolizer};

/// The BPF collector, with its ring buffer reader while one is open.
pub struct Kernel<'a> {
    collector: &'a mut Collector,
    ring: Option<EventRing<'static>>,
    /// Records the ring's callback decoded, waiting for `poll`/`drain` to hand them on.
    inbox: Rc<RefCell<Vec<Option<RecordEvent>>>>,
}

impl<'a> Kernel<'a> {
    pub fn new(collector: &'a mut Collector) -> Self {
        Kernel {
            collector,
            ring: None,
            inbox: Rc::default(),
        }
    }

    /// The collector itself, between polls.
    pub fn collector(&mut self) -> &mut Collector {
        self.collector
    }

    fn take_inbox(&self, out: &mut Vec<RingRecord>) {
        out.extend(self.inbox.borrow_mut().drain(..).map(|ev| match ev {
            Some(RecordEvent::Sample(s)) => RingRecord::Sample(s),
            Some(RecordEvent::Link(l)) => RingRecord::Link(l),
            Some(RecordEvent::OffCpu(o)) => RingRecord::OffCpu(o),
            Some(RecordEvent::Exec { pid }) => RingRecord::Exec(pid),
            None => RingRecord::Undecodable,
        }));
    }
}

impl KernelSource for Kernel<'_> {
    type Error = CollectError;

    fn attach_mono_ns(&self) -> u64 {
        self.collector.attach_mono_ns
    }

    fn now_ns(&self) -> u64 {
        pkprof_collect::monotonic_ns()
    }

    fn max_threads(&self) -> u32 {
        self.collector.max_threads()
    }

    fn open_ring(&mut self) -> Result<(), CollectError> {
        let sink = Rc::clone(&self.inbox);
        self.ring = Some(
            self.collector
                .event_ring(move |ev| sink.borrow_mut().push(ev))?,
        );
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, out: &mut Vec<RingRecord>) -> Result<(), CollectError> {
        if let Some(ring) = &self.ring {
            ring.poll(timeout)?;
            // Records the kernel submitted without a wakeup (below the ring's threshold) are
            // read at every poll too, not only once the threshold is reached: a Python sample's
            // code objects are read from the process while it lives (a short program's samples
            // waited for the end, its exit, and named no Python function). A read of the ring's
            // positions in shared memory: no system call, no extra kernel wakeup.
            ring.drain()?;
        }
        self.take_inbox(out);
        Ok(())
    }

    fn drain(&mut self, out: &mut Vec<RingRecord>) -> Result<(), CollectError> {
        if let Some(ring) = &self.ring {
            ring.drain()?;
        }
        self.take_inbox(out);
        Ok(())
    }

    fn close_ring(&mut self) {
        self.ring = None;
    }

    fn snapshot(&mut self) -> Result<Snapshot, CollectError> {
        self.collector.snapshot()
    }

    fn untracked_target_ns(&mut self) -> Result<u64, CollectError> {
        self.collector.untracked_target_ns()
    }

    fn targets(&mut self) -> Vec<u32> {
        self.collector.targets()
    }

    fn mark_captured(&mut self, pid: u32) -> Result<(), CollectError> {
        self.collector.mark_captured(pid)
    }

    fn set_python(&mut self, pid: u32, l: &PyLayout) -> Result<(), CollectError> {
        let o = &l.offsets;
        let p = PyProc {
            runtime: l.runtime,
            runtime_interpreters_head: o.runtime_interpreters_head,
            interp_threads_head: o.interp_threads_head,
            tstate_next: o.tstate_next,
            tstate_native_thread_id: o.tstate_native_thread_id,
            tstate_cframe: o.tstate_cframe,
            tstate_current_frame: o.tstate_current_frame,
            frame_code: o.frame_code,
            frame_previous: o.frame_previous,
            frame_instr: o.frame_instr,
            frame_owner: o.frame_owner,
            frame_is_entry: o.frame_is_entry,
            owned_by_cstack: o.owned_by_cstack,
        };
        self.collector.set_python(pid, &p)
    }

    fn forget_python(&mut self, pid: u32) -> Result<(), CollectError> {
        self.collector.forget_python(pid)
    }
}

/// The symbolizer: captures the sampled processes' maps, unwinds their stacks, names addresses.
pub struct Symbolizing(pub Symbolizer);

impl ProcessMaps for Symbolizing {
    type Error = SymbolizeError;

    fn capture_process(&mut self, pid: u32) -> Result<(), SymbolizeError> {
        self.0.capture_process(pid)
    }

    fn ensure_mapped(&mut self, pid: u32, addr: u64) {
        self.0.ensure_mapped(pid, addr);
    }

    fn ensure_code_mapped(&mut self, pid: u32, addr: u64) {
        self.0.ensure_code_mapped(pid, addr);
    }

    fn unwind(
        &mut self,
        pid: u32,
        regs: UserRegs,
        stack: &[u8],
        window_full: bool,
        fp_chain: &[u64],
    ) -> UnwoundStack {
        self.0.unwind(pid, regs, stack, window_full, fp_chain)
    }

    fn maps_generation(&self, pid: u32) -> Option<u64> {
        self.0.maps_generation(pid)
    }

    fn executed(&mut self, pid: u32) {
        self.0.executed(pid);
    }

    fn detect_python(&mut self, pid: u32) -> PyDetect {
        self.0.detect_python(pid)
    }

    fn python_code(&mut self, pid: u32, offsets: &PyOffsets, addr: u64) -> Option<CodeInfo> {
        pkprof_symbolize::python::read_code(pid, addr, offsets)
    }

    /// The captured process's executable, else (not captured) `/proc/PID/exe` while it lives.
    fn exe(&mut self, pid: u32, live: bool) -> Option<String> {
        self.0.exe(pid).or_else(|| {
            live.then(|| std::fs::read_link(format!("/proc/{pid}/exe")))?
                .ok()
                .map(|exe| exe.to_string_lossy().into_owned())
        })
    }
}

impl Symbols for Symbolizing {
    fn is_executable(&self, pid: u32, addr: u64) -> Option<bool> {
        self.0.is_executable(pid, addr)
    }

    fn symbolize_kernel(&mut self, addrs: &[u64]) -> Vec<Vec<Frame>> {
        self.0.symbolize_kernel(addrs)
    }

    fn symbolize_user(&mut self, pid: u32, addrs: &[u64]) -> Vec<Vec<Frame>> {
        self.0.symbolize_user(pid, addrs)
    }

    fn syscall_name(&self, nr: u32) -> String {
        pkprof_collect::syscall_name(nr)
    }

    fn warnings(&self) -> Vec<String> {
        self.0.warnings()
    }
}
