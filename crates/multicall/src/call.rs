//! One operation of a multi-call ([`Call`]): what it does ([`Op`]), whether it is checked, its
//! result slot, and the failure rule shared by both engines.

use std::ffi::CStr;
use std::io::{IoSlice, IoSliceMut};
use std::marker::PhantomData;
use std::os::fd::RawFd;

use crate::Error;

/// The operation itself, with raw pointers: the engines' common input. Safe [`Call`]
/// constructors tie the pointers to borrows; the C API builds them from the caller's promise.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    /// `read(2)` (offset `None`, file position) or `pread(2)`.
    Read {
        fd: RawFd,
        buf: *mut u8,
        len: usize,
        offset: Option<u64>,
    },
    /// `write(2)` (offset `None`, file position) or `pwrite(2)`.
    Write {
        fd: RawFd,
        buf: *const u8,
        len: usize,
        offset: Option<u64>,
    },
    OpenAt {
        dirfd: RawFd,
        path: *const libc::c_char,
        flags: i32,
        mode: u32,
    },
    Close {
        fd: RawFd,
    },
    Fsync {
        fd: RawFd,
        datasync: bool,
    },
    Statx {
        dirfd: RawFd,
        path: *const libc::c_char,
        flags: i32,
        mask: u32,
        buf: *mut libc::statx,
    },
    SendMsg {
        fd: RawFd,
        msg: *const libc::msghdr,
        flags: i32,
    },
    /// `read`/`pread` into a registered buffer (`IORING_OP_READ_FIXED`).
    ReadFixed {
        fd: RawFd,
        buf: *mut u8,
        len: usize,
        offset: Option<u64>,
        index: u16,
    },
    /// `write`/`pwrite` from a registered buffer (`IORING_OP_WRITE_FIXED`).
    WriteFixed {
        fd: RawFd,
        buf: *const u8,
        len: usize,
        offset: Option<u64>,
        index: u16,
    },
    RecvMsg {
        fd: RawFd,
        msg: *mut libc::msghdr,
        flags: i32,
    },
}

/// A `msghdr` and its single owner: kept in a `Box` so its address survives moves of the `Call`.
#[derive(Debug)]
struct OwnedMsg(libc::msghdr);

/// One operation of a multi-call: the paper's `sys_params` entry (operation, arguments, result
/// slot, check flag). Buffers are borrowed for `'a`, so they outlive the batch.
#[derive(Debug)]
pub struct Call<'a> {
    pub(crate) op: Op,
    pub(crate) check: bool,
    pub(crate) result: Option<i64>,
    /// The fd argument is a slot of the ring's fixed-file table ([`Call::fixed`]).
    pub(crate) fixed: bool,
    /// openat only: open into this slot of the fixed-file table ([`Call::into_slot`]).
    pub(crate) slot: Option<u32>,
    /// openat only: try with `RESOLVE_CACHED` first ([`Call::resolve_cached`]).
    pub(crate) cached: bool,
    _msg: Option<Box<OwnedMsg>>,
    _borrows: PhantomData<&'a mut [u8]>,
}

impl<'a> Call<'a> {
    pub(crate) fn from_op(op: Op) -> Call<'a> {
        Call {
            op,
            check: false,
            result: None,
            fixed: false,
            slot: None,
            cached: false,
            _msg: None,
            _borrows: PhantomData,
        }
    }

    /// `read(fd, buf, buf.len())` at the file position.
    pub fn read(fd: RawFd, buf: &'a mut [u8]) -> Self {
        Call::from_op(Op::Read {
            fd,
            buf: buf.as_mut_ptr(),
            len: buf.len(),
            offset: None,
        })
    }

    /// `write(fd, buf, buf.len())` at the file position.
    pub fn write(fd: RawFd, buf: &'a [u8]) -> Self {
        Call::from_op(Op::Write {
            fd,
            buf: buf.as_ptr(),
            len: buf.len(),
            offset: None,
        })
    }

    /// `pread(fd, buf, buf.len(), offset)`; `offset` must be at most `i64::MAX`.
    pub fn pread(fd: RawFd, buf: &'a mut [u8], offset: u64) -> Self {
        Call::from_op(Op::Read {
            fd,
            buf: buf.as_mut_ptr(),
            len: buf.len(),
            offset: Some(offset),
        })
    }

    /// `pwrite(fd, buf, buf.len(), offset)`; `offset` must be at most `i64::MAX`.
    pub fn pwrite(fd: RawFd, buf: &'a [u8], offset: u64) -> Self {
        Call::from_op(Op::Write {
            fd,
            buf: buf.as_ptr(),
            len: buf.len(),
            offset: Some(offset),
        })
    }

    /// `openat(dirfd, path, flags, mode)`; the result is the new descriptor.
    pub fn openat(dirfd: RawFd, path: &'a CStr, flags: i32, mode: u32) -> Self {
        Call::from_op(Op::OpenAt {
            dirfd,
            path: path.as_ptr(),
            flags,
            mode,
        })
    }

    /// `close(fd)`.
    pub fn close(fd: RawFd) -> Self {
        Call::from_op(Op::Close { fd })
    }

    /// `fsync(fd)`.
    pub fn fsync(fd: RawFd) -> Self {
        Call::from_op(Op::Fsync {
            fd,
            datasync: false,
        })
    }

    /// `fdatasync(fd)`.
    pub fn fdatasync(fd: RawFd) -> Self {
        Call::from_op(Op::Fsync { fd, datasync: true })
    }

    /// `statx(dirfd, path, flags, mask, buf)`.
    pub fn statx(
        dirfd: RawFd,
        path: &'a CStr,
        flags: i32,
        mask: u32,
        buf: &'a mut libc::statx,
    ) -> Self {
        Call::from_op(Op::Statx {
            dirfd,
            path: path.as_ptr(),
            flags,
            mask,
            buf,
        })
    }

    /// `sendmsg(fd, {msg_iov = bufs}, flags)` on a connected socket. `MSG_NOSIGNAL` is always
    /// added (io_uring does so): a closed peer gives `-EPIPE`, not `SIGPIPE`.
    pub fn sendmsg<'b: 'a>(fd: RawFd, bufs: &'a [IoSlice<'b>], flags: i32) -> Self {
        // IoSlice is ABI-compatible with iovec on Unix (documented by std).
        let msg = Box::new(OwnedMsg(msghdr(
            bufs.as_ptr() as *mut libc::iovec,
            bufs.len(),
        )));
        let mut call = Call::from_op(Op::SendMsg {
            fd,
            msg: &msg.0,
            flags,
        });
        call._msg = Some(msg);
        call
    }

    /// `recvmsg(fd, {msg_iov = bufs}, flags)` on a connected socket.
    pub fn recvmsg<'b: 'a>(fd: RawFd, bufs: &'a mut [IoSliceMut<'b>], flags: i32) -> Self {
        let mut msg = Box::new(OwnedMsg(msghdr(
            bufs.as_mut_ptr() as *mut libc::iovec,
            bufs.len(),
        )));
        let mut call = Call::from_op(Op::RecvMsg {
            fd,
            msg: &mut msg.0,
            flags,
        });
        call._msg = Some(msg);
        call
    }

    /// `sendmsg(fd, msg, flags)` with a caller-built `msghdr` (addresses, control data).
    ///
    /// # Safety
    /// `msg`, and everything it points to, must stay valid and unaliased for `'a`.
    pub unsafe fn sendmsg_raw(fd: RawFd, msg: *const libc::msghdr, flags: i32) -> Self {
        Call::from_op(Op::SendMsg { fd, msg, flags })
    }

    /// `recvmsg(fd, msg, flags)` with a caller-built `msghdr`.
    ///
    /// # Safety
    /// `msg`, and everything it points to, must stay valid and unaliased for `'a`.
    pub unsafe fn recvmsg_raw(fd: RawFd, msg: *mut libc::msghdr, flags: i32) -> Self {
        Call::from_op(Op::RecvMsg { fd, msg, flags })
    }

    /// `read` (offset `None`) or `pread` into a buffer registered with
    /// [`MultiCall::register_buffers`](crate::MultiCall::register_buffers) as number `index`:
    /// `buf` must lie inside it (else the result is `-EFAULT`). The kernel skips pinning and
    /// mapping the pages per call. The sequential engine does a plain read/pread.
    pub fn read_fixed(fd: RawFd, buf: &'a mut [u8], index: u16, offset: Option<u64>) -> Self {
        Call::from_op(Op::ReadFixed {
            fd,
            buf: buf.as_mut_ptr(),
            len: buf.len(),
            offset,
            index,
        })
    }

    /// `write` (offset `None`) or `pwrite` from registered buffer `index`; see
    /// [`read_fixed`](Self::read_fixed).
    pub fn write_fixed(fd: RawFd, buf: &'a [u8], index: u16, offset: Option<u64>) -> Self {
        Call::from_op(Op::WriteFixed {
            fd,
            buf: buf.as_ptr(),
            len: buf.len(),
            offset,
            index,
        })
    }

    /// The fd argument is a slot of the ring's fixed-file table (a *direct descriptor*, see
    /// [`Options::file_slots`](crate::Options::file_slots)), not a descriptor: the kernel skips
    /// the descriptor-table lookup and reference count. For read, write, pread, pwrite, the
    /// fixed-buffer ops, close (empties the slot), fsync, sendmsg and recvmsg; not for the dirfd
    /// of openat or statx. An empty slot gives `-EBADF`.
    pub fn fixed(mut self) -> Self {
        self.fixed = true;
        self
    }

    /// openat only: open the file into slot `slot` of the ring's fixed-file table (replacing
    /// what it held) instead of the process's descriptor table. The result is then 0 on success,
    /// and the calls after it in the batch use the file as `Call::…(slot, …).fixed()`: this is
    /// how an openat hands its file on within one batch. `O_CLOEXEC` is ignored (a slot is never
    /// inherited by exec).
    pub fn into_slot(mut self, slot: u32) -> Self {
        self.slot = Some(slot);
        self
    }

    /// openat only: resolve the path from the dentry cache alone (`openat2` with
    /// `RESOLVE_CACHED`), so the open completes inline instead of being handed to an io-wq worker
    /// thread. If that needs I/O (`-EAGAIN`) the engine runs the rest of the batch again from this
    /// openat without the flag, in a second crossing; the result slot only ever shows the final
    /// result. No effect in the sequential engine.
    pub fn resolve_cached(mut self) -> Self {
        self.cached = true;
        self
    }

    /// Checks this operation: if it fails, the batch stops here (see the crate docs).
    pub fn checked(self) -> Self {
        self.check(true)
    }

    /// Sets the check flag (unchecked is the default).
    pub fn check(mut self, check: bool) -> Self {
        self.check = check;
        self
    }

    /// Whether this operation is checked.
    pub fn is_checked(&self) -> bool {
        self.check
    }

    /// The result slot: the system call's return value, or `-errno` (`-ECANCELED` when the batch
    /// stopped before this operation). `None` until a run has set it.
    pub fn result(&self) -> Option<i64> {
        self.result
    }

    /// Whether `result` is a failure of this operation (a negative result, or a short transfer of
    /// a read/write or of a `MSG_WAITALL` sendmsg/recvmsg), whether it is checked or not.
    pub fn is_failure(&self, result: i64) -> bool {
        result < 0
            || self
                .expected_len()
                .is_some_and(|want| (result as u64) < want)
    }

    /// The length a complete transfer returns, for the operations whose short transfers fail.
    fn expected_len(&self) -> Option<u64> {
        match self.op {
            Op::Read { len, .. }
            | Op::Write { len, .. }
            | Op::ReadFixed { len, .. }
            | Op::WriteFixed { len, .. } => Some(len as u64),
            Op::SendMsg { msg, flags, .. } if flags & libc::MSG_WAITALL != 0 => iov_total(msg),
            Op::RecvMsg { msg, flags, .. } if flags & libc::MSG_WAITALL != 0 => iov_total(msg),
            _ => None,
        }
    }

    /// Rejects what cannot be submitted as asked (`index` is 1-based; `file_slots` is the size
    /// of the engine's fixed-file table).
    pub(crate) fn validate(&self, index: usize, file_slots: u32) -> Result<(), Error> {
        let bad = |what| Err(Error::InvalidArgument { index, what });
        let is_open = matches!(self.op, Op::OpenAt { .. });
        if self.fixed {
            if matches!(self.op, Op::OpenAt { .. } | Op::Statx { .. }) {
                return bad("openat and statx take a descriptor as dirfd, not a fixed-file slot");
            }
            match self.op.fd() {
                Some(fd) if fd >= 0 && (fd as u32) < file_slots => {}
                _ => return bad("fixed-file slot out of the ring's table (Options::file_slots)"),
            }
        }
        if let Some(slot) = self.slot {
            if !is_open {
                return bad("into_slot applies to openat only");
            }
            if slot >= file_slots {
                return bad("into_slot: slot out of the ring's table (Options::file_slots)");
            }
        }
        if self.cached && !is_open {
            return bad("resolve_cached applies to openat only");
        }
        match self.op {
            Op::Read { len, offset, .. }
            | Op::Write { len, offset, .. }
            | Op::ReadFixed { len, offset, .. }
            | Op::WriteFixed { len, offset, .. } => {
                if len > u32::MAX as usize {
                    return bad("transfer longer than u32::MAX bytes");
                }
                if offset.is_some_and(|o| o > i64::MAX as u64) {
                    return bad("offset beyond i64::MAX");
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

impl Op {
    /// The descriptor (or fixed-file slot) argument, for the operations that take one.
    pub(crate) fn fd(&self) -> Option<RawFd> {
        match *self {
            Op::Read { fd, .. }
            | Op::Write { fd, .. }
            | Op::ReadFixed { fd, .. }
            | Op::WriteFixed { fd, .. }
            | Op::Close { fd }
            | Op::Fsync { fd, .. }
            | Op::SendMsg { fd, .. }
            | Op::RecvMsg { fd, .. } => Some(fd),
            Op::OpenAt { .. } | Op::Statx { .. } => None,
        }
    }
}

fn msghdr(iov: *mut libc::iovec, len: usize) -> libc::msghdr {
    // SAFETY: msghdr is a plain C struct for which all-zero is a valid (empty) value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = len as _;
    msg
}

/// Total length of a message's iovecs (`None` if the header or its array is null).
fn iov_total(msg: *const libc::msghdr) -> Option<u64> {
    if msg.is_null() {
        return None;
    }
    // SAFETY: constructors guarantee (safe ones by borrows, raw ones and the C API by the caller's
    // contract) that a non-null msghdr is valid for the whole run.
    let msg = unsafe { &*msg };
    if msg.msg_iov.is_null() {
        return None;
    }
    // msg_iovlen is size_t on glibc but int on musl.
    #[allow(clippy::unnecessary_cast)]
    let count = msg.msg_iovlen as usize;
    // SAFETY: as above, msg_iov points to msg_iovlen valid iovecs.
    let iov = unsafe { std::slice::from_raw_parts(msg.msg_iov, count) };
    Some(iov.iter().map(|v| v.iov_len as u64).sum())
}

/// The `(start, end)` range of each chain of a batch cut into chains of `lens` operations.
pub(crate) fn chains(lens: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
    lens.iter().scan(0, |start, &len| {
        let range = (*start, *start + len);
        *start += len;
        Some(range)
    })
}

/// 1-based index of the first checked failure, else `calls.len() + 1` (the paper's return value).
/// Operations without a result yet are skipped.
pub(crate) fn first_checked_failure(calls: &[Call<'_>]) -> usize {
    calls
        .iter()
        .position(|c| c.check && c.result.is_some_and(|r| c.is_failure(r)))
        .map_or(calls.len() + 1, |i| i + 1)
}
