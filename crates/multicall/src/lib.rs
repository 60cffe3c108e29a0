//! Multi-calls on io_uring: several system calls in one kernel crossing, with the semantics of
//! the multi-call in *System Call Clustering: A Profile-Directed Optimization Technique*
//! (Rajagopalan et al., figures 2 and 3). A Rust API ([`MultiCall`], [`Call`]) and a C library
//! (`include/pkprof_multicall.h`, built as `libpkprof_multicall.a` / `.so`).
//!
//! # Semantics
//!
//! A batch is an array of operations, each with arguments, a *check* flag and a result slot.
//! [`MultiCall::run`] (C: `multi_call`) runs them **in order, in one `io_uring_enter`**:
//!
//! - Every result slot is set: the system call's return value, or `-errno`.
//! - A **checked** operation *fails* if its result is negative, or, for read, write, pread and
//!   pwrite, if it transferred fewer bytes than asked (a *short transfer*: the operations after it
//!   were prepared for the full length). The same holds for sendmsg/recvmsg with `MSG_WAITALL`;
//!   without it a short sendmsg/recvmsg is not a failure, as for the system calls. A short
//!   transfer leaves its count (`>= 0`) in the slot, so the sign tells it from an error.
//! - The batch stops at the first checked failure: the operations after it do not run and their
//!   slots hold `-ECANCELED`.
//! - An **unchecked** operation never stops the batch, whatever its result.
//! - The return value is the 1-based index of the first checked failure, or `count + 1` if there
//!   was none (the paper's convention: `count + 1` means "all ran, nothing checked failed").
//!
//! ## How it maps to io_uring, and what the kernel really does
//!
//! Each operation is one SQE, chained to the next with `IOSQE_IO_LINK` if it is checked and
//! `IOSQE_IO_HARDLINK` if not (the last SQE carries no link flag); the whole chain is submitted
//! and reaped with one `io_uring_enter(n, n, GETEVENTS)`. Verified on Linux 6.18 (and by this
//! crate's tests): a failing `IO_LINK` request cancels the rest of the chain (`-ECANCELED`),
//! including hard-linked requests after it; a failing `IO_HARDLINK` request does not. The kernel
//! also counts a *short* read or write as a link failure, for regular files (read at or across
//! EOF), pipes and sockets alike, and likewise a short `MSG_WAITALL` recvmsg, while a short plain
//! recvmsg does not break the link, which is exactly the rule above, so the kernel itself stops the
//! batch and user space only finds the index afterwards.
//!
//! ## Bad input and limits
//!
//! - An empty batch is [`Error::EmptyBatch`] (C: `-EINVAL`).
//! - A batch larger than the ring is [`Error::BatchTooLarge`] (C: `-E2BIG`); batches are never
//!   split, because that would cost one crossing per part. Open a ring of the right size.
//! - Arguments that cannot be expressed (length over `u32::MAX`, offset over `i64::MAX`, a
//!   negative length or offset or an out-of-range descriptor in C) are
//!   [`Error::InvalidArgument`] (C: `-EINVAL`); an unknown operation code in C is `-EOPNOTSUPP`.
//!   In all these cases nothing is submitted and the result slots are left as they were.
//! - A run never returns with an operation in flight. If `io_uring_enter` is interrupted it is
//!   retried; if it submits only part of the batch (the kernel could not allocate requests), the
//!   part in flight is reaped first and, unless a checked operation in it failed, the rest is
//!   submitted (the kernel ends a link chain at the end of an enter, so this is the only way to
//!   keep the stop rule); if it failed, the unsubmitted tail is marked `-ECANCELED` and the ring
//!   is retired ([`Error::Poisoned`] afterwards). If the kernel keeps failing while operations are
//!   in flight the process aborts rather than return with the kernel still writing into borrowed
//!   buffers (never seen; it would take a broken ring).
//!
//! ## Threads
//!
//! The ring is set up with `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN` where the
//! kernel has them (6.1+): the task work that issues each next request of a link then runs inside
//! the same `io_uring_enter` (measured: a two-call linked batch ~15% cheaper than with
//! `COOP_TASKRUN`, ~35% cheaper than with neither). The kernel then accepts submissions only from
//! the creating thread, so [`MultiCall`] is `!Send`; through the C API another thread gets
//! [`Error::WrongThread`] (`-EEXIST`) before anything is queued. Older kernels fall back to
//! `COOP_TASKRUN`, then to no flags.
//!
//! ## Without io_uring
//!
//! [`MultiCall::new`] fails with [`Error::Unavailable`] when `io_uring_setup` returns `ENOSYS`
//! (no io_uring in the kernel) or `EPERM` (`kernel.io_uring_disabled` = 2, or 1 without
//! privilege, or a seccomp filter); the message names the sysctl and its value.
//! [`MultiCall::sequential`] (C: `mc_open_sequential`) runs the same batches with the same
//! semantics, one plain system call per operation: results identical, more crossings. Its one
//! deliberate difference from the plain calls: sendmsg always gets `MSG_NOSIGNAL`, as io_uring
//! adds it.
//!
//! # Example
//!
//! ```
//! use pkprof_multicall::{Call, MultiCall};
//! use std::os::fd::AsRawFd;
//!
//! let path = std::env::temp_dir().join(format!("multicall-doc-{}", std::process::id()));
//! let file = std::fs::File::options().read(true).write(true).create(true).truncate(true).open(&path)?;
//! let fd = file.as_raw_fd();
//! let mut mc = MultiCall::new_or_sequential(8)?; // io_uring, or plain calls without it
//! let mut back = [0u8; 64];
//! let mut calls = [
//!     Call::pwrite(fd, b"hello", 0).checked(),
//!     Call::pread(fd, &mut back, 0).checked(), // asks for 64 bytes, gets 5: a short read
//!     Call::fsync(fd).checked(),
//! ];
//! let index = mc.run(&mut calls)?; // one kernel crossing
//! assert_eq!(index, 2); // the batch stopped at the short read...
//! assert_eq!(calls[1].result(), Some(5)); // ...which left its count in the slot
//! assert_eq!(calls[2].result(), Some(-i64::from(libc::ECANCELED))); // fsync never ran
//! assert_eq!(&back[..5], b"hello");
//! std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod call;
mod error;
pub mod ffi;
mod multicall;
mod options;
mod sequential;
mod uring;

pub use call::Call;
pub use error::Error;
pub use multicall::{with_thread_ring, MultiCall};
pub use options::Options;
