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
    _msg: Option<Box<OwnedMsg>>,
    _borrows: PhantomData<&'a mut [u8]>,
}

impl<'a> Call<'a> {
    pub(crate) fn from_op(op: Op) -> Call<'a> {
        Call {
            op,
            check: false,
            result: None,
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
            Op::Read { len, .. } | Op::Write { len, .. } => Some(len as u64),
            Op::SendMsg { msg, flags, .. } if flags & libc::MSG_WAITALL != 0 => iov_total(msg),
            Op::RecvMsg { msg, flags, .. } if flags & libc::MSG_WAITALL != 0 => iov_total(msg),
            _ => None,
        }
    }

    /// Rejects what cannot be submitted as asked (`index` is 1-based).
    pub(crate) fn validate(&self, index: usize) -> Result<(), Error> {
        let bad = |what| Err(Error::InvalidArgument { index, what });
        match self.op {
            Op::Read { len, offset, .. } | Op::Write { len, offset, .. } => {
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

/// 1-based index of the first checked failure, else `calls.len() + 1` (the paper's return value).
/// Operations without a result yet are skipped.
pub(crate) fn first_checked_failure(calls: &[Call<'_>]) -> usize {
    calls
        .iter()
        .position(|c| c.check && c.result.is_some_and(|r| c.is_failure(r)))
        .map_or(calls.len() + 1, |i| i + 1)
}
