//! Where the recording's data comes from, as traits: the kernel side (ring buffer of samples and
//! links, accounting reads, target set), the sampled processes (maps, unwinding, executables) and
//! the symbolizer that names addresses at assembly. `pkprof record` wires the real ones (the BPF
//! collector, the blazesym-based symbolizer); tests wire fakes and need no root.

use std::fmt::Display;
use std::time::Duration;

use pkprof_accounting::Snapshot;
use pkprof_attribution::{LinkEvent, OffCpuEvent, SampleEvent};
use pkprof_profile::Frame;
pub use pkprof_symbolize::{UnwoundStack, UserRegs};

use crate::python::{CodeInfo, PyDetect, PyLayout, PyOffsets};

/// One record of the kernel's ring buffer, decoded (docs/design.md, "Data flow").
#[derive(Clone, Debug, PartialEq)]
pub enum RingRecord {
    Sample(SampleEvent),
    Link(LinkEvent),
    /// An off-CPU sample (`record --off-cpu`).
    OffCpu(Box<OffCpuEvent>),
    /// A process looked at before ran a new image (execve): what was found of its interpreter
    /// no longer holds, and it is looked at again at its next sample.
    Exec(u32),
    /// A record of unknown kind or size: counted, shown as a warning in the profile.
    Undecodable,
}

/// The kernel side of a recording: samples and links as they come, and the exact accounting.
pub trait KernelSource {
    type Error: std::error::Error + Send + Sync + 'static;

    /// CLOCK_MONOTONIC when the programs were attached: where the accounting starts.
    fn attach_mono_ns(&self) -> u64;
    /// CLOCK_MONOTONIC now, the clock of samples' and links' `time_ns`.
    fn now_ns(&self) -> u64;
    /// Capacity of the kernel's thread table.
    fn max_threads(&self) -> u32;

    /// Starts reading the ring buffer.
    fn open_ring(&mut self) -> Result<(), Self::Error>;
    /// Waits up to `timeout` for ring records and appends them to `out`, in ring order. A signal
    /// (Ctrl-C) ends the wait early without an error.
    fn poll(&mut self, timeout: Duration, out: &mut Vec<RingRecord>) -> Result<(), Self::Error>;
    /// Appends every record already in the ring to `out`.
    fn drain(&mut self, out: &mut Vec<RingRecord>) -> Result<(), Self::Error>;
    /// Stops reading the ring buffer.
    fn close_ring(&mut self);

    /// One read of the exact accounting (cumulative since attach).
    fn snapshot(&mut self) -> Result<Snapshot, Self::Error>;
    /// Own time of target threads that found the thread table full, so far.
    fn untracked_target_ns(&mut self) -> Result<u64, Self::Error>;
    /// Processes in the kernel's target set now.
    fn targets(&mut self) -> Vec<u32>;
    /// Tells the sampler that `pid`'s maps are captured: its samples need not wake the reader.
    fn mark_captured(&mut self, pid: u32) -> Result<(), Self::Error>;
    /// Tells the sampler that `pid` runs the CPython `layout` describes: its samples carry its
    /// Python frames from now on (docs/design.md, "Python frames"). A source that cannot walk
    /// Python ignores it.
    fn set_python(&mut self, _pid: u32, _layout: &PyLayout) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Forgets `pid`'s Python layout (the process exited: its PID may come back as another).
    fn forget_python(&mut self, _pid: u32) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The sampled processes while they are alive: their maps (captured at their first sample), the
/// unwinding of their stacks, their executables.
pub trait ProcessMaps {
    type Error: Display;

    /// Captures `pid`'s executable mappings (cheap when done already; a failure is final).
    fn capture_process(&mut self, pid: u32) -> Result<(), Self::Error>;
    /// Re-captures when `addr` lies outside every captured mapping (rate-limited).
    fn ensure_mapped(&mut self, pid: u32, addr: u64);
    /// As `ensure_mapped`, for an address known to be code (re-read at once).
    fn ensure_code_mapped(&mut self, pid: u32, addr: u64);
    /// Unwinds a sampled user stack from its copied bytes (docs/design.md, "User stacks").
    fn unwind(
        &mut self,
        pid: u32,
        regs: UserRegs,
        stack: &[u8],
        window_full: bool,
        fp_chain: &[u64],
    ) -> UnwoundStack;
    /// The executable of `pid`, when known. `live` false: the process has exited, so only what
    /// was captured while it lived can be known (asking `/proc` again at every read of every
    /// exited process cost the agent 5% of its CPU under a fork loop).
    fn exe(&mut self, pid: u32, live: bool) -> Option<String>;
    /// Changes whenever `pid`'s captured mappings change (None: not captured, or not followed).
    fn maps_generation(&self, _pid: u32) -> Option<u64> {
        None
    }
    /// `pid` ran a new image (its exec record), or exited (its PID may come back as another
    /// program): what was captured of it is not what runs under that PID next.
    fn executed(&mut self, _pid: u32) {}
    /// Whether `pid` runs a CPython pkprof can walk (asked at its first sample, and again for
    /// one found not Python when its maps change: see `maps_generation`).
    fn detect_python(&mut self, _pid: u32) -> PyDetect {
        PyDetect::NotPython
    }
    /// Reads the code object at `addr` of `pid` laid out as `offsets` (None: unreadable).
    fn python_code(&mut self, _pid: u32, _offsets: &PyOffsets, _addr: u64) -> Option<CodeInfo> {
        None
    }
}

/// Names for what the samples hold, at assembly.
pub trait Symbols {
    /// Whether `addr` lies in an executable mapping captured for `pid` (None: nothing captured).
    fn is_executable(&self, pid: u32, addr: u64) -> Option<bool>;
    /// Frames of each kernel address, outermost first (never drops an address).
    fn symbolize_kernel(&mut self, addrs: &[u64]) -> Vec<Vec<Frame>>;
    /// Frames of each user address of `pid`, outermost first (never drops an address).
    fn symbolize_user(&mut self, pid: u32, addrs: &[u64]) -> Vec<Vec<Frame>>;
    /// The name of syscall `nr` on this architecture.
    fn syscall_name(&self, nr: u32) -> String;
    /// Problems met so far, one line each.
    fn warnings(&self) -> Vec<String>;
}
