//! [`MultiCall`]: the handle callers hold, its two engines (io_uring, sequential), and the checks
//! every batch passes before any operation reaches the kernel; and [`with_thread_ring`], one
//! reused ring per thread.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::call::{chains, first_checked_failure, Call};
use crate::sequential::Sequential;
use crate::uring::Ring;
use crate::{Error, Options};

/// Runs batches of system calls with the paper's multi-call semantics (see the crate docs).
///
/// Belongs to the thread that created it (`!Send`): the ring is set up single-issuer, and the
/// kernel refuses submissions from another thread.
pub struct MultiCall {
    engine: Engine,
    /// Why this is sequential, when a ring was asked for and refused.
    fallback_reason: Option<String>,
    _thread_bound: PhantomData<*const ()>,
}

enum Engine {
    Ring(Box<Ring>),
    Sequential(Sequential),
}

impl MultiCall {
    /// A multi-call on a new io_uring with `entries` submission entries (1..=32768; the kernel
    /// rounds up to a power of two). A batch may hold up to [`capacity`](Self::capacity)
    /// operations. Fails with [`Error::Unavailable`] when the kernel refuses io_uring.
    /// Same as `with_options(&Options::new(entries))`.
    pub fn new(entries: u32) -> Result<MultiCall, Error> {
        MultiCall::with_options(&Options::new(entries))
    }

    /// A multi-call on a new io_uring opened with `opts` (fixed-file table, SQPOLL, ...).
    pub fn with_options(opts: &Options) -> Result<MultiCall, Error> {
        Ok(MultiCall {
            engine: Engine::Ring(Box::new(Ring::new(opts)?)),
            fallback_reason: None,
            _thread_bound: PhantomData,
        })
    }

    /// The documented fallback: the same semantics with one plain system call per operation
    /// (one kernel crossing each instead of one per batch). Never fails; no size limit; no
    /// fixed-file slots.
    pub fn sequential() -> MultiCall {
        MultiCall {
            engine: Engine::Sequential(Sequential::new(0)),
            fallback_reason: None,
            _thread_bound: PhantomData,
        }
    }

    /// The sequential engine with `opts`'s number of (emulated) fixed-file slots; the other
    /// options do not apply to it.
    pub fn sequential_with_options(opts: &Options) -> MultiCall {
        MultiCall {
            engine: Engine::Sequential(Sequential::new(opts.file_slots)),
            fallback_reason: None,
            _thread_bound: PhantomData,
        }
    }

    /// [`new`](Self::new), or [`sequential`](Self::sequential) when io_uring is unavailable.
    /// Other errors (bad size, out of memory) are returned.
    pub fn new_or_sequential(entries: u32) -> Result<MultiCall, Error> {
        MultiCall::with_options_or_sequential(&Options::new(entries))
    }

    /// [`with_options`](Self::with_options), or the sequential engine with the same number of
    /// (emulated) file slots when io_uring is unavailable; [`describe`](Self::describe) then says
    /// why. Other errors are returned.
    pub fn with_options_or_sequential(opts: &Options) -> Result<MultiCall, Error> {
        match MultiCall::with_options(opts) {
            Err(Error::Unavailable { reason, .. }) => Ok(MultiCall {
                engine: Engine::Sequential(Sequential::new(opts.file_slots)),
                fallback_reason: Some(reason),
                _thread_bound: PhantomData,
            }),
            other => other,
        }
    }

    /// Whether this runs operations one by one (the fallback).
    pub fn is_sequential(&self) -> bool {
        matches!(self.engine, Engine::Sequential(_))
    }

    /// The largest batch: the ring's submission entries (`None`: unlimited, sequential).
    pub fn capacity(&self) -> Option<usize> {
        match &self.engine {
            Engine::Ring(ring) => Some(ring.capacity()),
            Engine::Sequential(_) => None,
        }
    }

    /// Slots in the fixed-file table ([`Options::file_slots`]).
    pub fn file_slots(&self) -> u32 {
        match &self.engine {
            Engine::Ring(ring) => ring.file_slots(),
            Engine::Sequential(seq) => seq.file_slots(),
        }
    }

    /// One line saying what runs the batches, e.g. `io_uring (single-issuer, defer-taskrun, 64
    /// file slots, ring fd registered)` or `sequential (io_uring is unavailable: ...)`.
    pub fn describe(&self) -> String {
        match (&self.engine, &self.fallback_reason) {
            (Engine::Ring(ring), _) => format!("io_uring ({})", ring.setup),
            (Engine::Sequential(_), Some(why)) => {
                format!("sequential (io_uring is unavailable: {why})")
            }
            (Engine::Sequential(_), None) => "sequential (asked for)".to_string(),
        }
    }

    /// Kernel crossings this handle has made: `io_uring_enter` calls (with SQPOLL, only those
    /// that woke the polling thread or waited), or, sequential, the plain system calls.
    pub fn enters(&self) -> u64 {
        match &self.engine {
            Engine::Ring(ring) => ring.enters,
            Engine::Sequential(seq) => seq.calls,
        }
    }

    /// Second crossings made because a [`resolve_cached`](Call::resolve_cached) openat needed
    /// I/O (or, unchecked, failed) and the rest of its chain was run again.
    pub fn cached_open_retries(&self) -> u64 {
        match &self.engine {
            Engine::Ring(ring) => ring.cached_retries,
            Engine::Sequential(_) => 0,
        }
    }

    /// CPU time the process's SQPOLL threads (`iou-sqp-<pid>`) have used so far, in
    /// nanoseconds from `/proc/self/task/*/schedstat` (the scheduler's run time; the clock ticks
    /// of `stat`, 10 ms each, where a kernel has no schedstat); `None` if there are none. All
    /// SQPOLL rings of the process are summed. `getrusage(RUSAGE_SELF)` already includes it (the
    /// thread is the process's).
    pub fn sqpoll_cpu() -> Option<Duration> {
        let mut total: Option<Duration> = None;
        for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let dir = task.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if !comm.starts_with("iou-sqp") {
                continue;
            }
            if let Some(ns) = schedstat_run_ns(&dir).or_else(|| stat_cpu_ns(&dir)) {
                *total.get_or_insert(Duration::ZERO) += Duration::from_nanos(ns);
            }
        }
        total
    }

    /// Puts `fds` into the fixed-file table from slot `first` on (replacing what the slots held).
    /// The table keeps its own reference to each file: the caller may close its descriptors.
    pub fn register_files(&mut self, first: u32, fds: &[RawFd]) -> Result<(), Error> {
        if u64::from(first) + fds.len() as u64 > u64::from(self.file_slots()) {
            return Err(Error::InvalidArgument {
                index: 0,
                what: "register_files: slots beyond the ring's table (Options::file_slots)",
            });
        }
        match &mut self.engine {
            Engine::Ring(ring) => ring.register_files(first, fds),
            Engine::Sequential(seq) => {
                seq.register_files(first, fds)
                    .map_err(|source| Error::Register {
                        what: "files into the emulated fixed-file table (dup)",
                        source,
                    })
            }
        }
    }

    /// Registers `bufs` as fixed buffers 0, 1, ... for [`Call::read_fixed`] and
    /// [`Call::write_fixed`]: the kernel pins and maps them once instead of per operation. Only
    /// once per ring. The sequential engine ignores it.
    ///
    /// # Safety
    /// The memory must stay valid (not freed, not unmapped) for as long as this `MultiCall` lives.
    pub unsafe fn register_buffers(&mut self, bufs: &[libc::iovec]) -> Result<(), Error> {
        match &mut self.engine {
            // SAFETY: forwarded caller contract.
            Engine::Ring(ring) => unsafe { ring.register_buffers(bufs) },
            Engine::Sequential(_) => Ok(()),
        }
    }

    /// Runs `calls` in order in one kernel crossing and fills every result slot. Returns the
    /// 1-based index of the first checked operation that failed, or `calls.len() + 1` if none
    /// did. Errors mean nothing was submitted, except [`Error::Submit`] (see there).
    pub fn run(&mut self, calls: &mut [Call<'_>]) -> Result<usize, Error> {
        let mut index = [0];
        self.run_chains(calls, &[calls.len()], &mut index)?;
        Ok(index[0])
    }

    /// Runs several independent multi-calls in one kernel crossing: `calls` cut into chains of
    /// `lens[0]`, `lens[1]`, ... operations. Each chain has [`run`](Self::run)'s semantics on its
    /// own (in order, stops at its first checked failure); `index[i]` gets chain i's 1-based index
    /// of its first checked failure, or `lens[i] + 1`. Chains do not wait for each other and may
    /// run in any order or at once; one chain's failure never cancels another. This is the looped
    /// multi-call for iterations that do not depend on each other.
    pub fn run_chains(
        &mut self,
        calls: &mut [Call<'_>],
        lens: &[usize],
        index: &mut [usize],
    ) -> Result<(), Error> {
        if calls.is_empty() || lens.contains(&0) {
            return Err(Error::EmptyBatch);
        }
        if lens.iter().sum::<usize>() != calls.len() || index.len() != lens.len() {
            return Err(Error::InvalidArgument {
                index: 0,
                what: "chain lengths must add up to the batch and index must have one per chain",
            });
        }
        if let Some(capacity) = self.capacity() {
            if calls.len() > capacity {
                return Err(Error::BatchTooLarge {
                    len: calls.len(),
                    capacity,
                });
            }
        }
        let slots = self.file_slots();
        for (i, call) in calls.iter().enumerate() {
            call.validate(i + 1, slots)?;
        }
        for call in calls.iter_mut() {
            call.result = None;
        }
        match &mut self.engine {
            Engine::Ring(ring) => ring.run(calls, lens)?,
            Engine::Sequential(seq) => seq.run(calls, lens),
        }
        for ((start, end), slot) in chains(lens).zip(index.iter_mut()) {
            *slot = first_checked_failure(&calls[start..end]);
        }
        Ok(())
    }
}

/// A task's run time (ns) from its `schedstat` (`/proc/self/task/TID`), the first field.
fn schedstat_run_ns(task: &std::path::Path) -> Option<u64> {
    let s = std::fs::read_to_string(task.join("schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// A task's user + system time (ns) from its `stat`, in clock ticks (10 ms each).
fn stat_cpu_ns(task: &std::path::Path) -> Option<u64> {
    let stat = std::fs::read_to_string(task.join("stat")).ok()?;
    // Fields after the ")" that closes comm: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Some((ticks as f64 * 1e9 / clock_ticks() as f64) as u64)
}

fn clock_ticks() -> i64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t
    } else {
        100
    }
}

impl std::fmt::Debug for MultiCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiCall")
            .field("engine", &self.describe())
            .field("capacity", &self.capacity())
            .finish()
    }
}

thread_local! {
    static THREAD_RING: RefCell<Option<(Options, MultiCall)>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's ring, opened with `opts` on first use (or when `opts` differ from
/// the last call's) and reused after, so a program that batches from many places pays the ring
/// set-up (a few µs, plus `mmap`s) once per thread. Falls back to the sequential engine when
/// io_uring is unavailable. `f` must not call `with_thread_ring` itself (that panics: the ring
/// is borrowed).
pub fn with_thread_ring<R>(
    opts: &Options,
    f: impl FnOnce(&mut MultiCall) -> R,
) -> Result<R, Error> {
    THREAD_RING.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|(o, _)| o != opts) {
            *slot = Some((opts.clone(), MultiCall::with_options_or_sequential(opts)?));
        }
        let (_, mc) = slot.as_mut().expect("just set");
        Ok(f(mc))
    })
}
