//! The crate's typed errors, and the errno each one maps to at the C boundary.

use std::io;

/// What can go wrong around a multi-call. A failing *operation* is not an error: it is reported by
/// the index [`MultiCall::run`](crate::MultiCall::run) returns and by its result slot.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel refuses io_uring: it has none (`ENOSYS`), or it is switched off by the
    /// `kernel.io_uring_disabled` sysctl or a seccomp filter (`EPERM`). Use
    /// [`MultiCall::sequential`](crate::MultiCall::sequential) instead.
    #[error("io_uring is unavailable: {reason}")]
    Unavailable {
        /// What the kernel said, in words.
        reason: String,
        /// The error `io_uring_setup` returned.
        #[source]
        source: io::Error,
    },
    /// `io_uring_setup` failed for another reason (out of memory, locked-memory limit, ...).
    #[error("io_uring_setup({entries}) failed")]
    Setup {
        /// The requested ring size.
        entries: u32,
        /// The error `io_uring_setup` returned.
        #[source]
        source: io::Error,
    },
    /// The ring size must be 1..=32768 (the kernel's IORING_MAX_ENTRIES).
    #[error("invalid ring size {entries}: it must be between 1 and 32768")]
    InvalidRingSize {
        /// The requested ring size.
        entries: u32,
    },
    /// A multi-call needs at least one operation.
    #[error("empty batch: a multi-call needs at least one operation")]
    EmptyBatch,
    /// The batch has more operations than the ring has entries; nothing was submitted. Batches
    /// are never split (that would cost a crossing per part): open a larger ring.
    #[error(
        "batch of {len} operations exceeds the ring's {capacity} entries (open a larger ring)"
    )]
    BatchTooLarge {
        /// Operations in the batch.
        len: usize,
        /// Entries in the ring.
        capacity: usize,
    },
    /// An operation's arguments cannot be expressed (a length over 4 GiB, an offset over
    /// `i64::MAX`, a file descriptor out of range); nothing was submitted.
    #[error("operation {index} (1-based): {what}")]
    InvalidArgument {
        /// 1-based index of the operation, as in the multi-call's return value.
        index: usize,
        /// What is wrong with it.
        what: &'static str,
    },
    /// An operation code the C API does not know; nothing was submitted.
    #[error("operation {index} (1-based): unsupported operation code {code}")]
    Unsupported {
        /// 1-based index of the operation.
        index: usize,
        /// The unknown code.
        code: i32,
    },
    /// Registering files, buffers or the ring's descriptor with the kernel failed.
    #[error("io_uring could not register {what}")]
    Register {
        /// What was being registered.
        what: &'static str,
        /// The error `io_uring_register` returned.
        #[source]
        source: io::Error,
    },
    /// `io_uring_enter` failed for a reason other than a signal or a transient shortage. No
    /// operation of the batch is in flight any more; results of those that ran are set.
    #[error("io_uring_enter failed")]
    Submit(#[source] io::Error),
    /// The ring was used from another thread than the one that opened it (possible only through
    /// the C API; `MultiCall` is `!Send`); nothing was submitted and the ring is still usable
    /// from its own thread.
    #[error("the ring belongs to the thread that opened it")]
    WrongThread,
    /// An earlier batch could not be fully submitted; the ring may hold operations that must
    /// never run, so it refuses further batches. Open a new one.
    #[error("the ring is unusable after an earlier submission failure; open a new one")]
    Poisoned,
}

impl Error {
    /// The positive errno the C API reports for this error (it returns the negated value).
    pub fn errno(&self) -> i32 {
        match self {
            Error::Unavailable { source, .. }
            | Error::Setup { source, .. }
            | Error::Register { source, .. }
            | Error::Submit(source) => source.raw_os_error().unwrap_or(libc::EIO),
            Error::InvalidRingSize { .. } | Error::EmptyBatch | Error::InvalidArgument { .. } => {
                libc::EINVAL
            }
            Error::BatchTooLarge { .. } => libc::E2BIG,
            Error::Unsupported { .. } => libc::EOPNOTSUPP,
            Error::WrongThread => libc::EEXIST,
            Error::Poisoned => libc::EIO,
        }
    }
}
