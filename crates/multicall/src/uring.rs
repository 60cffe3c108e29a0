//! The io_uring engine: a batch becomes one chain of linked SQEs (`IOSQE_IO_LINK` after checked
//! operations, `IOSQE_IO_HARDLINK` after unchecked ones) submitted and reaped by one
//! `io_uring_enter`; and the drain that makes sure nothing is left in flight on return.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use io_uring::types::{DestinationSlot, Fd, Fixed, FsyncFlags, OpenHow};
use io_uring::{opcode, squeue, IoUring};

use crate::call::{chains, first_checked_failure, Call, Op};
use crate::{Error, Options};

/// The kernel's IORING_MAX_ENTRIES.
pub(crate) const MAX_ENTRIES: u32 = 32768;
/// `IORING_ENTER_GETEVENTS` from `<linux/io_uring.h>` (the io-uring crate keeps its copy private).
const IORING_ENTER_GETEVENTS: u32 = 1;
/// `IORING_ENTER_REGISTERED_RING`: the fd argument is a registered ring index.
const IORING_ENTER_REGISTERED_RING: u32 = 16;
/// `IORING_REGISTER_RING_FDS`.
const IORING_REGISTER_RING_FDS: u32 = 20;
/// `IORING_UNREGISTER_RING_FDS`.
const IORING_UNREGISTER_RING_FDS: u32 = 21;
/// `IORING_ENTER_SQ_WAKEUP`.
const IORING_ENTER_SQ_WAKEUP: u32 = 2;
/// `RESOLVE_CACHED` from `<linux/openat2.h>`.
const RESOLVE_CACHED: u64 = 0x20;
/// Retries of `EAGAIN`/`EBUSY` from `io_uring_enter` before giving up (about a second).
const TRANSIENT_RETRIES: u32 = 1000;
/// Hard `io_uring_enter` failures tolerated while operations are still in flight.
const HARD_RETRIES: u32 = 1000;

/// An io_uring instance, its options, and whether it is still usable.
pub(crate) struct Ring {
    ring: IoUring,
    /// Set when unsubmitted SQEs had to be abandoned in the queue: they must never reach the
    /// kernel, so the ring is never entered again.
    poisoned: bool,
    /// The thread that created a single-issuer ring: the only one the kernel lets submit.
    owner: Option<ThreadId>,
    sqpoll: bool,
    spin: Duration,
    file_slots: u32,
    /// What `io_uring_enter` gets: the ring's fd, or its registered index.
    enter_fd: RawFd,
    /// `IORING_ENTER_REGISTERED_RING` when `enter_fd` is an index.
    enter_flags: u32,
    /// What the ring was set up with, in words (for [`MultiCall::describe`]).
    pub(crate) setup: String,
    /// `io_uring_enter` calls made (kernel crossings).
    pub(crate) enters: u64,
    /// Second crossings made because a `RESOLVE_CACHED` openat needed I/O.
    pub(crate) cached_retries: u64,
    /// `open_how` structs of the batch in flight (openat2 reads them when the SQE is prepared).
    hows: Vec<OpenHow>,
}

impl Ring {
    pub(crate) fn new(opts: &Options) -> Result<Ring, Error> {
        let entries = opts.entries;
        if entries == 0 || entries > MAX_ENTRIES {
            return Err(Error::InvalidRingSize { entries });
        }
        // Set-up flags, best first; a kernel that lacks one rejects it with EINVAL and we try
        // the next. SUBMIT_ALL (5.18) keeps submitting past an SQE that fails to prepare.
        // SINGLE_ISSUER + DEFER_TASKRUN (6.1) run the task work that issues each next linked
        // request inside our own io_uring_enter instead of interrupting the task (a 2-op linked
        // batch: ~1.85 us vs ~2.15 us with COOP_TASKRUN (5.19) vs ~2.95 us with neither, on the
        // development VM); they tie the ring to the creating thread, hence MultiCall is !Send.
        // SQPOLL excludes DEFER_TASKRUN (the polling thread issues the requests).
        type Configure = fn(&mut io_uring::Builder);
        let plain: [(&str, Configure); 3] = [
            ("single-issuer, defer-taskrun", |b| {
                b.setup_submit_all()
                    .setup_single_issuer()
                    .setup_defer_taskrun();
            }),
            ("coop-taskrun", |b| {
                b.setup_submit_all().setup_coop_taskrun();
            }),
            ("no task-run flags", |_| {}),
        ];
        let polled: [(&str, Configure); 2] = [
            ("sqpoll, single-issuer", |b| {
                b.setup_submit_all().setup_single_issuer();
            }),
            ("sqpoll", |_| {}),
        ];
        let attempts: &[(&str, Configure)] = if opts.sqpoll_idle_ms.is_some() {
            &polled
        } else {
            &plain
        };
        let mut ring = Err(io::Error::from_raw_os_error(libc::EINVAL));
        let mut setup = String::new();
        for (name, configure) in attempts {
            let mut builder = IoUring::builder();
            configure(&mut builder);
            if let Some(idle) = opts.sqpoll_idle_ms {
                builder.setup_sqpoll(idle);
            }
            ring = builder.build(entries);
            setup = (*name).to_string();
            if !matches!(&ring, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
                break;
            }
        }
        let ring = ring.map_err(|source| setup_error(entries, source))?;
        if opts.file_slots > 0 {
            ring.submitter()
                .register_files_sparse(opts.file_slots)
                .map_err(|source| Error::Register {
                    what: "a sparse fixed-file table (IORING_REGISTER_FILES2)",
                    source,
                })?;
            setup += &format!(", {} file slots", opts.file_slots);
        }
        // The io-uring crate keeps a registered ring index in a Submitter, which it recreates on
        // every call, so we register and enter ourselves. 5.18+; without it every enter looks
        // the ring fd up, which is only slower. The index belongs to this thread.
        let mut enter_fd = ring.as_raw_fd();
        let mut enter_flags = 0;
        if opts.register_ring_fd {
            if let Some(index) = register_ring_fd(enter_fd) {
                enter_fd = index;
                enter_flags = IORING_ENTER_REGISTERED_RING;
                setup += ", ring fd registered";
            }
        }
        let owner = (ring.params().is_setup_single_issuer() || enter_flags != 0)
            .then(|| std::thread::current().id());
        Ok(Ring {
            ring,
            poisoned: false,
            owner,
            sqpoll: opts.sqpoll_idle_ms.is_some(),
            spin: opts.spin,
            file_slots: opts.file_slots,
            enter_fd,
            enter_flags,
            setup,
            enters: 0,
            cached_retries: 0,
            hows: Vec::new(),
        })
    }

    /// Submission queue entries: the largest batch.
    pub(crate) fn capacity(&self) -> usize {
        self.ring.params().sq_entries() as usize
    }

    pub(crate) fn file_slots(&self) -> u32 {
        self.file_slots
    }

    pub(crate) fn register_files(&mut self, first: u32, fds: &[RawFd]) -> Result<(), Error> {
        self.ring
            .submitter()
            .register_files_update(first, fds)
            .map(|_| ())
            .map_err(|source| Error::Register {
                what: "files into the fixed-file table (IORING_REGISTER_FILES_UPDATE)",
                source,
            })
    }

    /// # Safety
    /// See [`MultiCall::register_buffers`](crate::MultiCall::register_buffers).
    pub(crate) unsafe fn register_buffers(&mut self, bufs: &[libc::iovec]) -> Result<(), Error> {
        // SAFETY: forwarded caller contract (the memory outlives the ring's use of it).
        unsafe { self.ring.submitter().register_buffers(bufs) }.map_err(|source| Error::Register {
            what: "buffers (IORING_REGISTER_BUFFERS)",
            source,
        })
    }

    /// Runs a non-empty, validated batch of at most `capacity()` calls, cut into independent
    /// chains of `lens` operations; sets every result slot. A `RESOLVE_CACHED` openat that needs
    /// I/O is run again, with the rest of its chain, without the flag.
    pub(crate) fn run(&mut self, calls: &mut [Call<'_>], lens: &[usize]) -> Result<(), Error> {
        self.run_once(calls, lens)?;
        // Resume chains that a cached openat stopped only because of the soft link we gave it.
        for (start, end) in chains(lens) {
            let mut from = start;
            while let Some(i) = resume_point(&calls[from..end]).map(|i| from + i) {
                // -EAGAIN: run it again without the flag; an unchecked failure: go on after it.
                let again = calls[i].result == Some(-i64::from(libc::EAGAIN));
                let first = if again { i } else { i + 1 };
                for call in &mut calls[first..end] {
                    call.result = None;
                }
                self.cached_retries += 1;
                calls[i].cached = !again;
                let r = self.run_once(&mut calls[first..end], &[end - first]);
                calls[i].cached = true;
                r?;
                from = i + 1;
            }
        }
        Ok(())
    }

    fn run_once(&mut self, calls: &mut [Call<'_>], lens: &[usize]) -> Result<(), Error> {
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
        self.hows.clear();
        self.hows.reserve(n); // never reallocated while SQEs point into it
        {
            let mut sq = self.ring.submission();
            // Every run leaves the queue empty, so this only fails for an oversized batch.
            if sq.capacity() - sq.len() < n {
                return Err(Error::BatchTooLarge {
                    len: n,
                    capacity: sq.capacity(),
                });
            }
            'chains: for (start, end) in chains(lens) {
                for (i, call) in calls[start..end].iter().enumerate() {
                    let i = start + i;
                    // A cached openat is soft-linked whatever its check flag, so that -EAGAIN
                    // stops its chain; `run` resumes what the flag alone would not have stopped.
                    let flags = if i + 1 == end {
                        squeue::Flags::empty()
                    } else if call.check || call.cached {
                        squeue::Flags::IO_LINK
                    } else {
                        squeue::Flags::IO_HARDLINK
                    };
                    let entry = entry(call, &mut self.hows).flags(flags).user_data(i as u64);
                    // SAFETY: the entry's pointers (buffers, paths, msghdrs, statx, open_how) come
                    // from the Call, which borrows them for longer than this run (or, from the C
                    // API, by contract), or from `hows`, untouched until the next run; and `drain`
                    // returns only once no operation is in flight.
                    if unsafe { sq.push(&entry) }.is_err() {
                        break 'chains;
                    }
                    pushed += 1;
                }
            }
        } // dropping the queue publishes its tail
        if pushed < n {
            // Cannot happen (capacity checked above); cancel the unpushed tail rather than hang.
            for call in &mut calls[pushed..] {
                call.result = Some(-i64::from(libc::ECANCELED));
            }
            self.poisoned = true;
        }
        self.drain(&mut calls[..pushed], lens)
    }

    /// Submits what is queued and reaps until every call has its result. Normally one
    /// `io_uring_enter(n, n, GETEVENTS)` (with SQPOLL: none while the polling thread is awake);
    /// loops only on signals, transient shortages and partial submission, and never returns while
    /// an operation is in flight (its buffers are borrowed).
    fn drain(&mut self, calls: &mut [Call<'_>], lens: &[usize]) -> Result<(), Error> {
        let n = calls.len();
        let (mut done, mut transient, mut hard) = (0, 0, 0);
        let mut failure: Option<io::Error> = None;
        let mut submitted = false;
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
            if self.sqpoll {
                // The polling thread consumes the queue on its own; only wake it if it sleeps.
                let r = self.sqpoll_wait(!submitted, in_flight.max(1));
                submitted = true;
                if let Err(e) = r {
                    if !matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) {
                        // Nothing can be abandoned safely while the thread may hold requests.
                        hard += 1;
                        if hard > HARD_RETRIES {
                            eprintln!(
                                "pkprof-multicall: cannot reap io_uring operations ({e}); aborting"
                            );
                            std::process::abort();
                        }
                    }
                }
                continue;
            }
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
                // stop here ourselves if a checked operation of the split chain already failed.
                let cut = n - pending;
                if let Some((start, _)) = chains(lens).find(|&(s, e)| s < cut && cut < e) {
                    if first_checked_failure(&calls[start..cut]) <= cut - start {
                        self.abandon(calls);
                        return Ok(());
                    }
                }
            }
            self.enters += 1;
            let r = if in_flight == 0 {
                self.enter(pending, pending, IORING_ENTER_GETEVENTS)
            } else {
                self.enter(0, in_flight, IORING_ENTER_GETEVENTS)
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

    /// SQPOLL: wakes the polling thread if it sleeps (`wake`: just after queueing), then
    /// busy-polls the completion queue for up to `spin`, then waits in the kernel for `want`.
    fn sqpoll_wait(&mut self, wake: bool, want: usize) -> io::Result<()> {
        if wake {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            if self.ring.submission().need_wakeup() {
                self.enters += 1;
                self.enter(0, 0, IORING_ENTER_SQ_WAKEUP)?;
            }
        }
        let deadline = Instant::now() + self.spin;
        loop {
            if !self.ring.completion().is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                break;
            }
            std::hint::spin_loop();
        }
        self.enters += 1;
        let flags = if self.ring.submission().need_wakeup() {
            IORING_ENTER_GETEVENTS | IORING_ENTER_SQ_WAKEUP
        } else {
            IORING_ENTER_GETEVENTS
        };
        self.enter(0, want, flags).map(|_| ())
    }

    /// Marks the calls that never reached the kernel as cancelled and poisons the ring: their
    /// SQEs stay in the queue and must never be submitted.
    fn abandon(&mut self, calls: &mut [Call<'_>]) {
        for call in calls.iter_mut().filter(|c| c.result.is_none()) {
            call.result = Some(-i64::from(libc::ECANCELED));
        }
        self.poisoned = true;
    }

    /// One `io_uring_enter(to_submit, want, flags)` on this ring (by its registered index when
    /// it has one). Published SQEs are the only thing it submits.
    fn enter(&self, to_submit: usize, want: usize, flags: u32) -> io::Result<usize> {
        // SAFETY: no argument pointer is passed (NULL, size 0); the SQEs it submits were pushed
        // by run_once under the safety argument there.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                self.enter_fd,
                to_submit as u32,
                want as u32,
                flags | self.enter_flags,
                std::ptr::null::<libc::c_void>(),
                0usize,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }
}

impl Drop for Ring {
    /// The registered index holds a reference to the ring: without this the ring would live
    /// until the thread exits. (From another thread, possible only through the C API, the
    /// unregistration fails and the ring lives until its thread exits.)
    fn drop(&mut self) {
        if self.enter_flags & IORING_ENTER_REGISTERED_RING != 0 {
            let mut up = RsrcUpdate {
                offset: self.enter_fd as u32,
                resv: 0,
                data: 0,
            };
            // SAFETY: `up` is a valid io_uring_rsrc_update for the one entry the call reads.
            unsafe {
                libc::syscall(
                    libc::SYS_io_uring_register,
                    self.ring.as_raw_fd(),
                    IORING_UNREGISTER_RING_FDS,
                    &mut up as *mut RsrcUpdate,
                    1u32,
                )
            };
        }
    }
}

/// `struct io_uring_rsrc_update`.
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// Registers `fd` as this thread's ring (`IORING_REGISTER_RING_FDS`); its index, or `None` if
/// the kernel cannot (before 5.18).
fn register_ring_fd(fd: RawFd) -> Option<RawFd> {
    let mut up = RsrcUpdate {
        offset: u32::MAX, // any free index
        resv: 0,
        data: fd as u64,
    };
    // SAFETY: `up` is a valid io_uring_rsrc_update for the one entry the call reads and writes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            fd,
            IORING_REGISTER_RING_FDS,
            &mut up as *mut RsrcUpdate,
            1u32,
        )
    };
    (r == 1).then_some(up.offset as RawFd)
}

/// The position, within a chain's calls, of a cached openat whose failure stopped the rest of the
/// chain only because of the soft link it got for its `-EAGAIN` fallback: an `-EAGAIN` (retry it
/// without the flag), or a failure of an unchecked one (resume after it).
fn resume_point(calls: &[Call<'_>]) -> Option<usize> {
    let i = calls.iter().position(|c| {
        c.cached
            && c.result
                .is_some_and(|r| r == -i64::from(libc::EAGAIN) || (r < 0 && !c.check))
    })?;
    // Only if nothing before it stopped the chain, and something after it was cancelled.
    let stopped_before = first_checked_failure(&calls[..i]) <= i;
    let cancelled_after = calls[i + 1..]
        .first()
        .is_some_and(|c| c.result == Some(-i64::from(libc::ECANCELED)));
    let again = calls[i].result == Some(-i64::from(libc::EAGAIN));
    (!stopped_before && (again || cancelled_after)).then_some(i)
}

/// The SQE for one call (without link flags or user data). A cached openat's `open_how` goes
/// into `hows`, which has room for it (reserved by the caller, so it never moves).
fn entry(call: &Call<'_>, hows: &mut Vec<OpenHow>) -> squeue::Entry {
    let fixed = if call.fixed {
        squeue::Flags::FIXED_FILE
    } else {
        squeue::Flags::empty()
    };
    // With FIXED_FILE set the kernel reads the fd field as a slot of the fixed-file table.
    let entry = match call.op {
        // Offset -1 means "at the file position", like read(2)/write(2) (IORING_FEAT_RW_CUR_POS).
        Op::Read {
            fd,
            buf,
            len,
            offset,
        } => opcode::Read::new(Fd(fd), buf, len as u32)
            .offset(offset.unwrap_or(u64::MAX))
            .build()
            .flags(fixed),
        Op::Write {
            fd,
            buf,
            len,
            offset,
        } => opcode::Write::new(Fd(fd), buf, len as u32)
            .offset(offset.unwrap_or(u64::MAX))
            .build()
            .flags(fixed),
        Op::ReadFixed {
            fd,
            buf,
            len,
            offset,
            index,
        } => opcode::ReadFixed::new(Fd(fd), buf, len as u32, index)
            .offset(offset.unwrap_or(u64::MAX))
            .build()
            .flags(fixed),
        Op::WriteFixed {
            fd,
            buf,
            len,
            offset,
            index,
        } => opcode::WriteFixed::new(Fd(fd), buf, len as u32, index)
            .offset(offset.unwrap_or(u64::MAX))
            .build()
            .flags(fixed),
        Op::OpenAt {
            dirfd,
            path,
            flags,
            mode,
        } => {
            // Validated: a slot is in the table's range, far below the kernel's limit.
            let slot = call
                .slot
                .and_then(|s| DestinationSlot::try_from_slot_target(s).ok());
            // A direct descriptor has no close-on-exec bit: the kernel refuses O_CLOEXEC with
            // a slot (EINVAL), so it is dropped (meaningless there).
            let flags = if slot.is_some() {
                flags & !libc::O_CLOEXEC
            } else {
                flags
            };
            if call.cached {
                hows.push(
                    OpenHow::new()
                        .flags(flags as u32 as u64)
                        .mode(u64::from(mode))
                        .resolve(RESOLVE_CACHED),
                );
                let how = hows.last().expect("just pushed") as *const OpenHow;
                opcode::OpenAt2::new(Fd(dirfd), path, how)
                    .file_index(slot)
                    .build()
            } else {
                opcode::OpenAt::new(Fd(dirfd), path)
                    .flags(flags)
                    .mode(mode)
                    .file_index(slot)
                    .build()
            }
        }
        // A fixed close names its slot in the file_index field, not with FIXED_FILE.
        Op::Close { fd } if call.fixed => opcode::Close::new(Fixed(fd as u32)).build(),
        Op::Close { fd } => opcode::Close::new(Fd(fd)).build(),
        Op::Fsync { fd, datasync } => {
            let flags = if datasync {
                FsyncFlags::DATASYNC
            } else {
                FsyncFlags::empty()
            };
            opcode::Fsync::new(Fd(fd)).flags(flags).build().flags(fixed)
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
            .build()
            .flags(fixed),
        Op::RecvMsg { fd, msg, flags } => opcode::RecvMsg::new(Fd(fd), msg)
            .flags(flags as u32)
            .build()
            .flags(fixed),
    };
    entry
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
