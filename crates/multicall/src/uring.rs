//! The io_uring engine: a batch becomes one chain of linked SQEs (`IOSQE_IO_LINK` after checked
//! operations, `IOSQE_IO_HARDLINK` after unchecked ones) submitted and reaped by one
//! `io_uring_enter`; and the drain that makes sure nothing is left in flight on return.

use std::io;
use std::thread::ThreadId;
use std::time::Duration;

use io_uring::types::{Fd, FsyncFlags};
use io_uring::{opcode, squeue, IoUring};

use crate::call::{first_checked_failure, Call, Op};
use crate::Error;

/// The kernel's IORING_MAX_ENTRIES.
pub(crate) const MAX_ENTRIES: u32 = 32768;
/// `IORING_ENTER_GETEVENTS` from `<linux/io_uring.h>` (the io-uring crate keeps its copy private).
const IORING_ENTER_GETEVENTS: u32 = 1;
/// Retries of `EAGAIN`/`EBUSY` from `io_uring_enter` before giving up (about a second).
const TRANSIENT_RETRIES: u32 = 1000;
/// Hard `io_uring_enter` failures tolerated while operations are still in flight.
const HARD_RETRIES: u32 = 1000;

/// An io_uring instance and whether it is still usable.
pub(crate) struct Ring {
    ring: IoUring,
    /// Set when unsubmitted SQEs had to be abandoned in the queue: they must never reach the
    /// kernel, so the ring is never entered again.
    poisoned: bool,
    /// The thread that created a single-issuer ring: the only one the kernel lets submit.
    owner: Option<ThreadId>,
}

impl Ring {
    pub(crate) fn new(entries: u32) -> Result<Ring, Error> {
        if entries == 0 || entries > MAX_ENTRIES {
            return Err(Error::InvalidRingSize { entries });
        }
        // Set-up flags, best first; a kernel that lacks one rejects it with EINVAL and we try
        // the next. SUBMIT_ALL (5.18) keeps submitting past an SQE that fails to prepare.
        // SINGLE_ISSUER + DEFER_TASKRUN (6.1) run the task work that issues each next linked
        // request inside our own io_uring_enter instead of interrupting the task (a 2-op linked
        // batch: ~1.85 us vs ~2.15 us with COOP_TASKRUN (5.19) vs ~2.95 us with neither, on the
        // development VM); they tie the ring to the creating thread, hence MultiCall is !Send.
        let attempts: [fn(&mut io_uring::Builder); 3] = [
            |b| {
                b.setup_submit_all()
                    .setup_single_issuer()
                    .setup_defer_taskrun();
            },
            |b| {
                b.setup_submit_all().setup_coop_taskrun();
            },
            |_| {},
        ];
        let mut ring = Err(io::Error::from_raw_os_error(libc::EINVAL));
        for configure in attempts {
            let mut builder = IoUring::builder();
            configure(&mut builder);
            ring = builder.build(entries);
            if !matches!(&ring, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
                break;
            }
        }
        let ring = ring.map_err(|source| setup_error(entries, source))?;
        let owner = ring
            .params()
            .is_setup_single_issuer()
            .then(|| std::thread::current().id());
        Ok(Ring {
            ring,
            poisoned: false,
            owner,
        })
    }

    /// Submission queue entries: the largest batch.
    pub(crate) fn capacity(&self) -> usize {
        self.ring.params().sq_entries() as usize
    }

    /// Runs a non-empty, validated batch of at most `capacity()` calls; sets every result slot.
    pub(crate) fn run(&mut self, calls: &mut [Call<'_>]) -> Result<(), Error> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        // The kernel would refuse the enter (EEXIST) after we queued the SQEs, which would then
        // have to be abandoned with the ring; refuse before queueing instead.
        if self
            .owner
            .is_some_and(|owner| owner != std::thread::current().id())
        {
            return Err(Error::WrongThread);
        }
        let n = calls.len();
        let mut pushed = 0;
        {
            let mut sq = self.ring.submission();
            // Every run leaves the queue empty, so this only fails for an oversized batch.
            if sq.capacity() - sq.len() < n {
                return Err(Error::BatchTooLarge {
                    len: n,
                    capacity: sq.capacity(),
                });
            }
            for (i, call) in calls.iter().enumerate() {
                let flags = if i + 1 == n {
                    squeue::Flags::empty()
                } else if call.check {
                    squeue::Flags::IO_LINK
                } else {
                    squeue::Flags::IO_HARDLINK
                };
                let entry = entry(&call.op).flags(flags).user_data(i as u64);
                // SAFETY: the entry's pointers (buffers, paths, msghdrs, statx) come from the Call,
                // which borrows them for longer than this run (or, from the C API, by contract),
                // and `drain` returns only once no operation is in flight.
                if unsafe { sq.push(&entry) }.is_err() {
                    break;
                }
                pushed += 1;
            }
        } // dropping the queue publishes its tail
        if pushed < n {
            // Cannot happen (capacity checked above); cancel the unpushed tail rather than hang.
            for call in &mut calls[pushed..] {
                call.result = Some(-i64::from(libc::ECANCELED));
            }
            self.poisoned = true;
        }
        self.drain(&mut calls[..pushed])
    }

    /// Submits what is queued and reaps until every call has its result. Normally one
    /// `io_uring_enter(n, n, GETEVENTS)`; loops only on signals, transient shortages and partial
    /// submission, and never returns while an operation is in flight (its buffers are borrowed).
    fn drain(&mut self, calls: &mut [Call<'_>]) -> Result<(), Error> {
        let n = calls.len();
        let (mut done, mut transient, mut hard) = (0, 0, 0);
        let mut failure: Option<io::Error> = None;
        loop {
            for cqe in self.ring.completion() {
                if let Some(call) = calls.get_mut(cqe.user_data() as usize) {
                    if call.result.is_none() {
                        call.result = Some(i64::from(cqe.result()));
                        done += 1;
                    }
                }
            }
            if done == n {
                return Ok(());
            }
            let pending = self.ring.submission().len(); // queued, not yet consumed by the kernel
            let in_flight = n.saturating_sub(done + pending);
            if in_flight == 0 && pending == 0 {
                // Every SQE yields exactly one CQE, so this means completions were lost (a kernel
                // bug); nothing is in flight, so report it rather than spin.
                self.abandon(calls);
                return Err(Error::Submit(io::Error::other("io_uring lost completions")));
            }
            if in_flight == 0 {
                // Only unsubmitted operations remain: an earlier enter stopped part-way.
                if let Some(e) = failure.take() {
                    self.abandon(calls);
                    return Err(Error::Submit(e));
                }
                // The kernel ends a chain with the enter, so the rest would start a new chain:
                // stop here ourselves if a checked operation already failed.
                if first_checked_failure(calls) <= n {
                    self.abandon(calls);
                    return Ok(());
                }
            }
            let r = if in_flight == 0 {
                self.ring.submitter().submit_and_wait(pending)
            } else {
                self.wait(in_flight)
            };
            let Err(e) = r else {
                transient = 0;
                continue;
            };
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN | libc::EBUSY) if transient < TRANSIENT_RETRIES => {
                    transient += 1;
                    if in_flight == 0 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                _ if in_flight == 0 => {
                    self.abandon(calls);
                    return Err(Error::Submit(e));
                }
                _ => {
                    // Operations in flight write into the caller's buffers: returning now would
                    // let the kernel write into freed memory. Keep waiting; give up only by abort.
                    hard += 1;
                    if hard > HARD_RETRIES {
                        eprintln!("pkprof-multicall: cannot reap {in_flight} in-flight io_uring operations ({e}); aborting");
                        std::process::abort();
                    }
                    failure.get_or_insert(e);
                }
            }
        }
    }

    /// Marks the calls that never reached the kernel as cancelled and poisons the ring: their
    /// SQEs stay in the queue and must never be submitted.
    fn abandon(&mut self, calls: &mut [Call<'_>]) {
        for call in calls.iter_mut().filter(|c| c.result.is_none()) {
            call.result = Some(-i64::from(libc::ECANCELED));
        }
        self.poisoned = true;
    }

    /// Waits for `want` completions without submitting anything.
    fn wait(&self, want: usize) -> io::Result<usize> {
        // SAFETY: to_submit = 0 submits nothing; GETEVENTS only waits; no argument is passed.
        unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(
                0,
                want as u32,
                IORING_ENTER_GETEVENTS,
                None,
            )
        }
    }
}

/// The SQE for one operation (without link flags or user data).
fn entry(op: &Op) -> squeue::Entry {
    match *op {
        // Offset -1 means "at the file position", like read(2)/write(2) (IORING_FEAT_RW_CUR_POS).
        Op::Read {
            fd,
            buf,
            len,
            offset,
        } => opcode::Read::new(Fd(fd), buf, len as u32)
            .offset(offset.unwrap_or(u64::MAX))
            .build(),
        Op::Write {
            fd,
            buf,
            len,
            offset,
        } => opcode::Write::new(Fd(fd), buf, len as u32)
            .offset(offset.unwrap_or(u64::MAX))
            .build(),
        Op::OpenAt {
            dirfd,
            path,
            flags,
            mode,
        } => opcode::OpenAt::new(Fd(dirfd), path)
            .flags(flags)
            .mode(mode)
            .build(),
        Op::Close { fd } => opcode::Close::new(Fd(fd)).build(),
        Op::Fsync { fd, datasync } => {
            let flags = if datasync {
                FsyncFlags::DATASYNC
            } else {
                FsyncFlags::empty()
            };
            opcode::Fsync::new(Fd(fd)).flags(flags).build()
        }
        Op::Statx {
            dirfd,
            path,
            flags,
            mask,
            buf,
        } => opcode::Statx::new(Fd(dirfd), path, buf.cast())
            .flags(flags)
            .mask(mask)
            .build(),
        Op::SendMsg { fd, msg, flags } => opcode::SendMsg::new(Fd(fd), msg)
            .flags(flags as u32)
            .build(),
        Op::RecvMsg { fd, msg, flags } => opcode::RecvMsg::new(Fd(fd), msg)
            .flags(flags as u32)
            .build(),
    }
}

/// Turns an `io_uring_setup` failure into an error that says why io_uring is missing.
fn setup_error(entries: u32, source: io::Error) -> Error {
    match source.raw_os_error() {
        Some(libc::ENOSYS) => Error::Unavailable {
            reason: "the kernel has no io_uring (io_uring_setup returned ENOSYS: built without \
                     CONFIG_IO_URING, or blocked by a seccomp filter); use the sequential fallback"
                .to_string(),
            source,
        },
        Some(libc::EPERM) => {
            let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled");
            let reason = match sysctl.as_deref().map(str::trim) {
                Ok(v) if v != "0" => format!(
                    "io_uring_setup returned EPERM: kernel.io_uring_disabled = {v} \
                     (/proc/sys/kernel/io_uring_disabled; 1 allows only CAP_SYS_ADMIN and the \
                     kernel.io_uring_group, 2 disables io_uring for everyone); use the sequential \
                     fallback"
                ),
                Ok(v) => format!(
                    "io_uring_setup returned EPERM although kernel.io_uring_disabled = {v}: a \
                     seccomp filter or LSM forbids it; use the sequential fallback"
                ),
                Err(_) => "io_uring_setup returned EPERM (kernel.io_uring_disabled, a seccomp \
                           filter or an LSM forbids it); use the sequential fallback"
                    .to_string(),
            };
            Error::Unavailable { reason, source }
        }
        _ => Error::Setup { entries, source },
    }
}
